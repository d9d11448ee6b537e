"""``killpoint doctor`` end to end: exit 0 with a proof on a machine that has Postgres, one line and exit 2
when something is missing, and nothing left behind either way."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import psutil
import pytest

from killpoint.cli import main as cli
from killpoint.env.postgres import auto, reaper
from killpoint.env.postgres.binaries import find_local
from killpoint.env.postgres.handle import PostgresHandle
from killpoint.env.postgres.local import free_port
from killpoint.env.postgres.reaper import own_clusters, owner_alive
from tests.helpers.sandbox import Sandbox


def leftovers() -> list[str]:
    """Cluster folders (and so servers) whose owner process is gone: what a finished run left behind.

    Folders of live processes are not counted: other sessions on this machine may be running. Both default
    roots (memory and the temp folder) are looked in."""
    return [
        p.name
        for root in reaper.reapable_roots()
        for p in root.iterdir()
        if not p.name.startswith("reaping-") and not owner_alive(p.name)
    ]


def orphan_servers() -> list[int]:
    """Postmasters running out of a cluster folder whose owner is gone."""
    roots = [str(root) for root in reaper.reapable_roots()]
    found = []
    for proc in psutil.process_iter(["name"]):
        try:
            cwd = proc.cwd() if proc.info["name"] == "postgres" else ""
        except psutil.Error:
            continue
        for root in roots:
            if cwd.startswith(root + "/") and not owner_alive(cwd[len(root) + 1 :].split("/")[0]):
                found.append(proc.pid)
    return found


@pytest.mark.skipif(find_local() is None, reason="no Postgres server binaries on this machine")
def test_doctor_end_to_end(sandbox: Sandbox) -> None:
    proc = sandbox.run("doctor")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for row in ("python", "docker", "local", "embedded", "choice", "server"):
        assert f"\n  {row}" in out
    assert "auto chose" in out and "committed row survived" in out
    assert out.strip().splitlines()[-1].startswith("ok: this machine can run killpoint")
    assert "Traceback" not in proc.stderr
    assert leftovers() == [] and orphan_servers() == []
    assert sandbox.survivors() == [] and sandbox.leftover_dirs() == []  # its cluster root is the sandbox's
    assert f"under {sandbox.pg_root} (KILLPOINT_PG_ROOT)" in out, out


@pytest.mark.skipif(find_local() is None, reason="no Postgres server binaries on this machine")
@pytest.mark.skipif(reaper.memory_dir() is None, reason="no tmpfs with room at /dev/shm on this machine")
@pytest.mark.parametrize(("in_memory", "said"), [("1", "(in memory;"), ("0", "(on disk:")])
def test_doctor_says_whether_clusters_live_in_memory(in_memory: str, said: str, sandbox: Sandbox) -> None:
    """Without KILLPOINT_PG_ROOT the cluster goes in memory where there is room: doctor names the folder and
    which it is, and nothing is left in either root."""
    env = {k: v for k, v in sandbox.env().items() if k != "KILLPOINT_PG_ROOT"}
    env[reaper.MEMORY_VAR] = in_memory
    proc = subprocess.run(sandbox.argv("doctor"), capture_output=True, text=True, cwd=sandbox.cwd, env=env,
                          timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("  server")]
    base = reaper.MEMORY_DIR if in_memory == "1" else Path(tempfile.gettempdir())
    assert f"under {base / f'killpoint-pg-{os.geteuid()}'} {said}" in line, line
    assert leftovers() == [] and orphan_servers() == []


def test_doctor_dsn_refusing_connections_is_one_line(sandbox: Sandbox) -> None:
    proc = sandbox.run("doctor", "--dsn", f"postgresql://postgres@127.0.0.1:{free_port()}/killpoint_test")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("killpoint: error[dsn-refused]: ") and "Fix: " in lines[0]


def test_doctor_unsafe_dsn_is_refused(sandbox: Sandbox) -> None:
    proc = sandbox.run("doctor", "--dsn", "postgresql://postgres@127.0.0.1:5432/orders")
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
    before = own_clusters()
    started: list[int] = []
    original = PostgresHandle.create_database

    def interrupt(self: PostgresHandle, name: str) -> str:  # the server is up by the time this runs
        assert self.running
        started.append(self.proc.pid)
        raise KeyboardInterrupt

    monkeypatch.setattr(PostgresHandle, "create_database", interrupt)
    assert cli.main(["doctor", "--postgres", "local"]) == 130
    monkeypatch.setattr(PostgresHandle, "create_database", original)
    assert own_clusters() == before
    assert len(started) == 1 and not psutil.pid_exists(started[0])
