"""The CLI's frame: version, help, the one-line error contract, Ctrl-C."""

from __future__ import annotations

import argparse

import pytest

from harness import __version__, cli
from harness.errors import EnvironmentProblem


def test_version(killpoint_cli) -> None:  # noqa: ANN001
    proc = killpoint_cli("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"killpoint {__version__}"


def test_help_lists_doctor(killpoint_cli) -> None:  # noqa: ANN001
    proc = killpoint_cli("--help")
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
