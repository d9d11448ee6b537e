"""No process or temp dir outlives the harness: not after Ctrl-C (SIGINT), not after its own SIGKILL.

The harness runs as a real `killpoint explore --exhaustive` subprocess in a sandbox (its own TMPDIR and
Postgres cluster root, and a tag in its environment that every process it starts inherits). It is
interrupted once it is mid-trial, with workers running; then psutil must find no forkserver, worker or
postgres left, and the sandbox's temp dirs must be empty. After a SIGKILL the fork server and workers die
by their parent-death signal and the Postgres server by its own; what is left on disk is reaped by the
next start.
"""

from __future__ import annotations

import json
import signal
import subprocess

import psutil
import pytest

from killpoint.env.stepmodule import DEFAULT_STEPS
from tests.helpers.agents import wait_for
from tests.helpers.checks import describe
from tests.helpers.harness import BROKEN_AGENT
from tests.helpers.sandbox import Sandbox

pytestmark = pytest.mark.usefixtures("no_zygote")  # the harness's own fork servers, its descendants

EXPLORE = ("explore", "--scenario", "crash-points", "--exhaustive", "--postgres", "local")


def trial_started(sandbox: Sandbox) -> bool:
    """True once the journal shows a trial's (not the baseline's) second incarnation: mid-trial."""
    for journal in sandbox.out.glob("*/history.jsonl"):
        for line in journal.read_text().splitlines():
            event = json.loads(line) if line.endswith("}") else {}
            if event.get("type") == "inc.start" and not event["run_id"].startswith("baseline") \
                    and event["inc"].endswith("#2"):
                return True
    return False


def descendants(proc: subprocess.Popen[str]) -> list[psutil.Process]:
    return psutil.Process(proc.pid).children(recursive=True)


def kinds(procs: list[psutil.Process]) -> list[str]:
    """What each process is: 'postgres' (the server and its backends), 'forkserver' (the fork server and the
    workers it forked, which keep its command line), or 'other'."""
    out = []
    for p in procs:
        try:
            name, cmd = p.name(), p.cmdline()
        except psutil.Error:
            continue
        out.append("postgres" if name == "postgres" else "forkserver" if "killpoint.env.forkserver" in cmd else "other")
    return out


def start_mid_trial(sandbox: Sandbox) -> tuple[subprocess.Popen[str], list[psutil.Process]]:
    """Start exploring and return once a trial is under way with a worker alive (and its descendants then)."""
    proc = sandbox.start(*EXPLORE, "--out", str(sandbox.out))

    def busy() -> list[psutil.Process] | None:
        if proc.poll() is not None or not trial_started(sandbox):
            return None
        kids = descendants(proc)
        found = kinds(kids)
        return kids if "postgres" in found and found.count("forkserver") >= 2 else None  # server + a worker

    try:
        kids = wait_for(lambda: busy() or proc.poll() is not None, 90, "a trial with a live worker")
        assert proc.poll() is None, "the harness ended before it was interrupted"
        return proc, kids
    except BaseException:
        proc.kill()
        proc.communicate()
        raise


def postmaster(procs: list[psutil.Process]) -> bool:
    """True once a Postgres server (not initdb, not `postgres --version`) is among `procs`."""
    for p in procs:
        try:
            if p.name() == "postgres" and "-D" in p.cmdline():
                return True
        except psutil.Error:
            continue
    return False


def gone(kids: list[psutil.Process]) -> bool:
    return not any(k.is_running() and k.status() != psutil.STATUS_ZOMBIE for k in kids)


def test_passing_and_failing_runs_leave_nothing(sandbox: Sandbox) -> None:
    """A run that passes (exit 0) and one whose checkers fail (exit 1: the broken agent) clean up alike."""
    for steps, code in ((DEFAULT_STEPS, 0), (BROKEN_AGENT, 1)):
        proc = sandbox.run("replay", "--scenario", "crash-points", "--schedule", "email:effect.applied:kill",
                           "--steps", steps, "--postgres", "local", "--out", str(sandbox.out), "--quiet")
        assert proc.returncode == code, describe(proc)
        assert sandbox.survivors() == [] and sandbox.leftover_dirs() == []


def test_sigint_mid_run_leaves_nothing(sandbox: Sandbox) -> None:
    proc, kids = start_mid_trial(sandbox)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    result = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    assert proc.returncode == 130, describe(result)
    assert "interrupted" in err and "Traceback" not in err, describe(result)
    # everything was stopped before the harness exited: nothing to wait for
    assert gone(kids), [k.cmdline() for k in kids if k.is_running()]
    assert sandbox.survivors() == []
    assert sandbox.leftover_dirs() == []


def test_sigint_while_starting_leaves_nothing(sandbox: Sandbox) -> None:
    proc = sandbox.start(*EXPLORE, "--out", str(sandbox.out))
    try:
        wait_for(lambda: postmaster(descendants(proc)) or proc.poll() is not None, 60, "the postmaster to start")
        kids = descendants(proc)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, describe(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    assert "Traceback" not in err, err
    assert gone(kids) and sandbox.survivors() == [] and sandbox.leftover_dirs() == []


def test_sigkill_of_the_harness_leaves_no_process_and_next_start_reaps(sandbox: Sandbox) -> None:
    proc, kids = start_mid_trial(sandbox)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    # fork server and workers (SIGKILL) and postgres (SIGQUIT) die by parent-death signals
    wait_for(lambda: gone(kids) and not sandbox.survivors(), 30, "the harness's processes to die")
    assert sandbox.leftover_dirs() != []  # a SIGKILLed harness cannot clean up its folders...
    # ...the next start of a Postgres (here the quickest: `killpoint doctor`) does, and itself leaves nothing
    nxt = sandbox.run("doctor", "--postgres", "local")
    assert nxt.returncode == 0, describe(nxt)
    assert sandbox.survivors() == [] and sandbox.leftover_dirs() == []

