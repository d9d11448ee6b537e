"""``killpoint doctor`` end to end: exit 0 with a proof on a machine that has Postgres, one line and exit 2
when something is missing, and nothing left behind either way."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from harness import cli
from harness.postgres import auto
from harness.postgres.binaries import find_local
from harness.postgres.handle import PostgresHandle
from harness.postgres.local import free_port
from harness.postgres.reaper import clusters_root

ROOT = Path(__file__).resolve().parent.parent


def killpoint(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


def my_servers() -> set[int]:
    """Postmasters running out of killpoint cluster folders."""
    root = str(clusters_root())
    found = set()
    for proc in psutil.process_iter(["name"]):
        try:
            if proc.info["name"] == "postgres" and proc.cwd().startswith(root):
                found.add(proc.pid)
        except psutil.Error:
            continue
    return found


@pytest.mark.skipif(find_local() is None, reason="no Postgres server binaries on this machine")
def test_doctor_end_to_end() -> None:
    before_dirs, before_servers = set(clusters_root().iterdir()), my_servers()
    proc = killpoint("doctor")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for row in ("python", "docker", "local", "embedded", "choice", "server"):
        assert f"\n  {row}" in out
    assert "auto chose" in out and "committed row survived" in out
    assert out.strip().splitlines()[-1].startswith("ok: this machine can run killpoint")
    assert "Traceback" not in proc.stderr
    assert set(clusters_root().iterdir()) <= before_dirs
    assert my_servers() <= before_servers


def test_doctor_dsn_refusing_connections_is_one_line() -> None:
    proc = killpoint("doctor", "--dsn", f"postgresql://postgres@127.0.0.1:{free_port()}/killpoint_test")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("killpoint: error[dsn-refused]: ") and "Fix: " in lines[0]


def test_doctor_unsafe_dsn_is_refused() -> None:
    proc = killpoint("doctor", "--dsn", "postgresql://postgres@127.0.0.1:5432/orders")
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("killpoint: error[dsn-not-test]: ")
    assert len(proc.stderr.strip().splitlines()) == 1


def test_doctor_no_postgres_anywhere(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(auto, "PROBES", {k: (lambda k=k: f"no {k} here") for k in auto.AUTO_ORDER})
    assert cli.main(["doctor"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("killpoint: error[no-postgres]: no Postgres available")


@pytest.mark.skipif(find_local() is None, reason="no Postgres server binaries on this machine")
def test_ctrl_c_while_starting_leaves_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    before_dirs, before_servers = set(clusters_root().iterdir()), my_servers()
    original = PostgresHandle.create_database

    def interrupt(self: PostgresHandle, name: str) -> str:  # the server is up by the time this runs
        assert getattr(self, "running", True)
        raise KeyboardInterrupt

    monkeypatch.setattr(PostgresHandle, "create_database", interrupt)
    assert cli.main(["doctor", "--postgres", "local"]) == 130
    monkeypatch.setattr(PostgresHandle, "create_database", original)
    assert set(clusters_root().iterdir()) <= before_dirs
    assert my_servers() <= before_servers
