"""The CLI's frame: version, help, the one-line error contract, Ctrl-C."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys

import psutil
import pytest

from killpoint import __version__
from killpoint.cli import main as cli
from killpoint.env.postgres.binaries import find_local
from killpoint.errors import EnvironmentProblem
from tests.helpers import REPO
from tests.helpers.sandbox import Sandbox, default_sigint


def test_version(sandbox: Sandbox) -> None:
    proc = sandbox.run("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"killpoint {__version__}"


def test_help_lists_doctor(sandbox: Sandbox) -> None:
    proc = sandbox.run("--help")
    assert proc.returncode == 0 and "doctor" in proc.stdout


def test_no_command_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2


def _with_command(monkeypatch: pytest.MonkeyPatch, func) -> None:  # noqa: ANN001
    def register(sub: argparse._SubParsersAction) -> None:
        sub.add_parser("boom").set_defaults(func=func)

    monkeypatch.setattr(cli, "REGISTRARS", [*cli.REGISTRARS, register])


def test_killpoint_error_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def boom(_args: argparse.Namespace) -> int:
        raise EnvironmentProblem("thing-missing", "the thing is missing", "install the thing")

    _with_command(monkeypatch, boom)
    assert cli.main(["boom"]) == 2
    err = capsys.readouterr().err
    assert err == "killpoint: error[thing-missing]: the thing is missing. Fix: install the thing\n"


def test_ctrl_c_exits_130(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def interrupted(_args: argparse.Namespace) -> int:
        raise KeyboardInterrupt

    _with_command(monkeypatch, interrupted)
    assert cli.main(["boom"]) == 130
    assert "interrupted" in capsys.readouterr().err


HOLDER = """
import sys, threading
from killpoint.cli import main as cli
from killpoint.env.postgres import provide

def hold(_args):
    with provide("local") as pg:
        print(pg.dir, pg.proc.pid, flush=True)
        threading.Event().wait()

cli.REGISTRARS.append(lambda sub: sub.add_parser("hold").set_defaults(func=hold))
sys.exit(cli.main(["hold"]))
"""


@pytest.mark.skipif(find_local() is None, reason="no Postgres server binaries on this machine")
@pytest.mark.parametrize(
    ("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"]
)
def test_signal_while_holding_a_server_cleans_up(sig: int, code: int) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        preexec_fn=default_sigint,  # as from a terminal, however pytest itself was started
    )
    assert proc.stdout is not None
    folder, pid = proc.stdout.readline().split()
    assert os.path.isdir(folder)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "Traceback" not in err
    assert not os.path.exists(folder)
    assert not psutil.pid_exists(int(pid)) or psutil.Process(int(pid)).status() == psutil.STATUS_ZOMBIE
