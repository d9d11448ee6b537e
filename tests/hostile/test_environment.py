"""A hostile environment (issue 13): the processes a session stands on killed under it, a TMPDIR too long for
a unix socket, a current directory that cannot be written, a time budget that cuts the random schedules.
Each asserts the exit code, the one line (or the note) and that nothing is left behind."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import psutil
import pytest

from tests.helpers.agents import wait_for
from tests.helpers.sandbox import Sandbox

REPLAY = ("replay", "--scenario", "crash-points", "--schedule", "email:effect.applied:kill")


def _postmaster(harness: psutil.Process, sandbox: Sandbox) -> psutil.Process:
    (pm,) = [p for p in harness.children() if p.name() == "postgres" and str(sandbox.pg_root) in " ".join(p.cmdline())]
    return pm


def _fork_servers(harness: psutil.Process) -> list[psutil.Process]:
    """The harness's live fork servers (a child that is a zombie or gone meanwhile is passed over)."""
    out = []
    for p in harness.children():
        try:
            if "killpoint.env.forkserver" in " ".join(p.cmdline()):
                out.append(p)
        except psutil.Error:
            continue
    return out


def _fork_server(harness: psutil.Process, _sandbox: Sandbox) -> psutil.Process:
    servers = _fork_servers(harness)
    assert servers, [p.cmdline() for p in harness.children()]
    return min(servers, key=lambda p: p.pid)  # the one that forks every run's first incarnation


@pytest.mark.parametrize(("victim", "code", "says"), [
    (_postmaster, "database-gone", "the database went away"),
    (_fork_server, "forkserver-gone", "the fork server"),
], ids=["postmaster", "fork-server"])
def test_a_vital_process_killed_mid_run_ends_it_in_one_line(sandbox: Sandbox, victim, code: str, says: str) -> None:
    """SIGKILLed at a known point of a run, the local Postgres or a fork server ends the run at once: one
    line, exit 2, nothing left. The 25 s bound is below the 30 s the harness once waited for a dead fork
    server's answer: it fails on that wait coming back, not on a slow machine (the run ends in about 2 s)."""
    proc = sandbox.start("run", "--scenario", "crash-points", "--postgres", "local", "--quiet",
                         "--out", str(sandbox.out))
    try:
        sandbox.until_faulted_run(proc)
        victim(psutil.Process(proc.pid), sandbox).kill()
        out, err = proc.communicate(timeout=25)
    finally:
        _end(proc)
    _ended_in_one_line(sandbox, proc.returncode, out, err, code, says)


def _end(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


def _ended_in_one_line(sandbox: Sandbox, returncode: int, out: str, err: str, code: str, says: str) -> None:
    """Exit 2 with one line `killpoint: error[CODE]: ...SAYS... Fix: ...`, and nothing left behind."""
    line = err.strip()
    assert returncode == 2, (returncode, out[-2000:], line[-3000:])
    assert "Traceback" not in line
    assert len(line.splitlines()) == 1, line
    assert line.startswith(f"killpoint: error[{code}]: ") and says in line and ". Fix: " in line, line
    wait_for(lambda: not sandbox.survivors(), timeout=30, what="the run's processes to be gone")
    assert sandbox.leftover_dirs() == []


def test_a_tmpdir_too_long_for_a_unix_socket_still_runs(sandbox: Sandbox) -> None:
    """TMPDIR of 150 bytes: the cluster and barrier sockets go to a short private root under /tmp instead,
    the run passes, and nothing is left there or in TMPDIR."""
    tmpdir = sandbox.root / ("t" * (150 - len(str(sandbox.root)) - 1))
    tmpdir.mkdir()
    env = {k: v for k, v in sandbox.env().items() if k != "KILLPOINT_PG_ROOT"}
    env["TMPDIR"] = str(tmpdir)
    env["KILLPOINT_PG_IN_MEMORY"] = "0"  # the clusters' root is under TMPDIR, not in /dev/shm
    proc = subprocess.Popen(sandbox.argv(*REPLAY, "--postgres", "local", "--out", str(sandbox.out)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=sandbox.cwd, env=env,
                            stdin=subprocess.DEVNULL)
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, (out[-2000:], err[-2000:])
    assert "install Postgres" not in out + err
    assert re.search(r"^PASS\s+crash-points", out, re.M), out
    assert list(tmpdir.iterdir()) == []
    short_root = Path("/tmp") / f"killpoint-pg-{os.geteuid()}"
    assert not short_root.exists() or [p for p in short_root.iterdir() if f"-{proc.pid}-" in p.name] == []
    assert sandbox.survivors() == []


def _read_only_cwd_works() -> bool:
    """Whether this machine lets a test mount a folder read-only in a mount namespace of its own."""
    if shutil.which("unshare") is None:
        return False
    with tempfile.TemporaryDirectory() as d:
        probe = subprocess.run(["unshare", "-m", "sh", "-c", 'mount --bind "$0" "$0" && mount -o remount,ro,bind '
                                '"$0" "$0" && ! touch "$0/x" 2>/dev/null', d], capture_output=True, timeout=30)
        return probe.returncode == 0


@pytest.mark.skipif(not _read_only_cwd_works(), reason="cannot mount a read-only folder here (needs unshare -m)")
@pytest.mark.parametrize(("argv", "says"), [
    (REPLAY, "--out .killpoint/runs: cannot write in {cwd}"),
    (("run", "--scenario", "crash-points", "--out", "{out}"), "the failure store .killpoint/failures: cannot write"),
], ids=["default-out", "failure-store"])
def test_an_unwritable_current_directory_is_refused_before_anything_starts(sandbox: Sandbox, argv: tuple[str, ...],
                                                                          says: str) -> None:
    """The current directory read-only (a read-only bind mount in a private mount namespace: as root, a mode of
    0555 stops nobody): where `.killpoint/` would be made is refused in one line, exit 2, nothing started."""
    args = [a.format(out=sandbox.out) for a in argv]
    script = 'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" "$0" && cd "$0" && exec "$@"'
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script, str(sandbox.cwd), *sandbox.argv(*args)],
                          capture_output=True, text=True, env=sandbox.env(), timeout=120, stdin=subprocess.DEVNULL)
    line = proc.stderr.strip()
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], line[-2000:])
    assert len(line.splitlines()) == 1 and line.startswith("killpoint: error[path-not-writable]: "), line
    assert says.format(cwd=sandbox.cwd) in line, line
    assert "Traceback" not in line
    assert sandbox.survivors() == []
    assert sandbox.leftover_dirs() == []
    assert not sandbox.out.exists() or not any(sandbox.out.iterdir())
    assert not (sandbox.cwd / ".killpoint").exists()


def test_a_budget_that_cuts_the_random_schedules_says_so(sandbox: Sandbox) -> None:
    """`--budget 0`: every exhaustive schedule still runs (they depend on the agent alone), and the random
    ones the budget cut are named in the summary line and in verdicts.json."""
    proc = sandbox.run("run", "--scenario", "crash-points", "--budget", "0", "--seed", "7", "--no-store",
                       "--out", str(sandbox.out))
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-2000:])
    note = "random: 0 of 8 schedules, the budget of 0 s ran out"
    summary = [ln for ln in proc.stdout.splitlines() if re.match(r"^PASS\s+crash-points", ln)]
    assert summary and f"[{note}]" in summary[0], proc.stdout[-3000:]
    (run_dir,) = list(sandbox.out.iterdir())
    (result,) = json.loads((run_dir / "verdicts.json").read_text())
    assert result["cut"] == note
    sweep = {int(m) for m in re.findall(r"crash-points: \[\d+/(\d+)\]", proc.stdout + proc.stderr)}
    assert len(sweep) == 1 and len(result["trials"]) == sweep.pop(), proc.stderr[-2000:]
    assert all(t["seed"] is None for t in result["trials"])
    assert sandbox.survivors() == []
    assert sandbox.leftover_dirs() == []


def test_a_fork_server_killed_while_it_imports_ends_the_session_in_one_line(sandbox: Sandbox) -> None:
    """The second fork server SIGKILLed as soon as it is seen (while it imports the agent, or just after):
    one line naming the fork server as killed, exit 2, nothing left (not "could not import the agent")."""
    proc = sandbox.start(*REPLAY, "--postgres", "local", "--quiet", "--out", str(sandbox.out))
    try:
        harness = psutil.Process(proc.pid)

        def second() -> psutil.Process | None:
            servers = _fork_servers(harness)
            return max(servers, key=lambda p: p.pid) if len(servers) == 2 else None

        wait_for(lambda: second() is not None or proc.poll() is not None, timeout=180, what="the second fork server")
        assert proc.poll() is None, proc.communicate()
        second().kill()
        out, err = proc.communicate(timeout=60)
    finally:
        _end(proc)
    _ended_in_one_line(sandbox, proc.returncode, out, err, "forkserver-gone", "the fork server")
