"""Nothing leaves the machine (issue 25 item 1): a step that connects to a host off the machine (TEST-NET
203.0.113.1, which never answers: the guard refuses before any packet) is refused and reported with host,
port and step, and the session exits non-zero, even when the agent swallows the error; with
`--allow-egress` the guard lets it through (the connection then fails on its own, which is fine). A client
that connects while the module is imported is reported too. Under `--spawn fork` and `--spawn exec`."""

from __future__ import annotations

import pytest

from killpoint.env import egress_shim
from tests.helpers.sandbox import Sandbox

AGENT = '''
import socket
from killpoint.reference_agent.invoice_agent import MIGRATIONS, OWN_EFFECTS_SQL, START, STATE_VERSION, initial_state
from killpoint.reference_agent.invoice_agent import STEPS as _STEPS


def _reach():
    try:
        socket.create_connection(("203.0.113.1", 443), timeout=0.3).close()
    except OSError:
        pass  # the agent swallows it: the guard's report must not depend on the agent


if {at_import}:
    _reach()


def charge(cp, ctx):
    if not {at_import}:
        _reach()
    return _STEPS["charge"](cp, ctx)


STEPS = {{**_STEPS, "charge": charge}}
'''

REPLAY = ("replay", "--scenario", "crash-points", "--schedule", "email:effect.applied:kill", "--postgres", "local")


def _run(sandbox: Sandbox, spawn: str, at_import: bool, *extra: str):
    (sandbox.cwd / "egress_agent.py").write_text(AGENT.format(at_import=at_import))
    return sandbox.run(*REPLAY, "--steps", "egress_agent", "--spawn", spawn, "--out", str(sandbox.out), *extra)


@pytest.mark.parametrize("spawn", ["fork", "exec"])
def test_a_step_reaching_off_the_machine_is_refused_and_named(sandbox: Sandbox, spawn: str) -> None:
    done = _run(sandbox, spawn, False)
    text = done.stdout + done.stderr
    assert done.returncode != 0, text[-3000:]
    assert "203.0.113.1:443 at step charge" in text, text[-3000:]
    assert "--allow-egress" in text and "Traceback" not in done.stderr, text[-3000:]


@pytest.mark.parametrize("spawn", ["fork", "exec"])
def test_a_connection_at_import_is_refused_and_named(sandbox: Sandbox, spawn: str) -> None:
    done = _run(sandbox, spawn, True)
    text = done.stdout + done.stderr
    assert done.returncode != 0, text[-3000:]
    assert "203.0.113.1:443" in text, text[-3000:]


def test_allow_egress_lets_the_host_through(sandbox: Sandbox) -> None:
    done = _run(sandbox, "fork", False, "--allow-egress", "203.0.113.1")
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    assert "egress blocked" not in done.stdout + done.stderr and "no_egress" not in done.stdout


def test_doctor_says_which_guard_is_active(sandbox: Sandbox) -> None:
    done = sandbox.run("doctor", "--postgres", "local")
    assert "egress" in done.stdout and "other --worker-cmd workers by a preloaded library" in done.stdout, done.stdout


BLACK_BOX_WORKER = '''
import os, runpy, socket, sys

try:
    socket.create_connection(("203.0.113.1", 443), timeout=0.3).close()
except OSError:
    pass  # swallowed, as in AGENT
os.environ.pop("KILLPOINT_SOCKET", None)  # the worker below is a black box: its checkpoints are held in SQL
sys.argv = ["worker", *sys.argv[1:]]
runpy.run_module("killpoint.reference_agent.worker", run_name="__main__", alter_sys=True)
'''


@pytest.mark.parametrize("how", [[], ["--worker-preload", "none"], ["--spawn", "exec"]],
                         ids=["forked", "exec-preload-none", "exec-spawn"])
def test_a_python_worker_cmd_is_guarded_forked_or_execd(sandbox: Sandbox, how: list[str]) -> None:
    """A `--worker-cmd` that is this Python running a script is guarded in every incarnation: forked from a
    preloaded server, and exec'd (`--worker-preload none`, `--spawn exec`, a clock fault) through the guard's
    own entry. Without it an exec'd worker's connection left unwatched and the run passed."""
    (sandbox.cwd / "bb_worker.py").write_text(BLACK_BOX_WORKER)
    done = sandbox.run("replay", "--scenario", "crash-points", "--schedule", "charge:checkpoint.writing:kill",
                       "--worker-cmd", "python bb_worker.py {run_id}", "--postgres", "local", *how,
                       "--out", str(sandbox.out))
    text = done.stdout + done.stderr
    assert done.returncode == 1, text[-3000:]
    assert "no_egress" in done.stdout and "203.0.113.1:443" in text, text[-3000:]
    assert "egress guard: off" not in text, text[-3000:]
    assert sandbox.survivors() == []


def test_an_execd_python_worker_cmd_reaching_an_allowed_host_passes(sandbox: Sandbox) -> None:
    """The look-alike that is correct: the same exec'd worker with its host allowed is not refused."""
    (sandbox.cwd / "bb_worker.py").write_text(BLACK_BOX_WORKER)
    done = sandbox.run("replay", "--scenario", "crash-points", "--schedule", "charge:checkpoint.writing:kill",
                       "--worker-cmd", "python bb_worker.py {run_id}", "--postgres", "local", "--worker-preload",
                       "none", "--allow-egress", "203.0.113.1", "--out", str(sandbox.out))
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    assert "egress blocked" not in done.stdout + done.stderr and "no_egress" not in done.stdout


SHELL_WORKER = """#!/bin/sh
# a worker that is not Python: a shell script whose first act reaches off the machine through bash's /dev/tcp
# (libc's getaddrinfo and connect), then the reference worker as a black box
timeout 1 bash -c 'exec 3<>/dev/tcp/203.0.113.1/443' 2>/dev/null
unset KILLPOINT_SOCKET
exec python -m killpoint.reference_agent.worker "$@"
"""


def test_a_worker_cmd_that_is_not_python_is_guarded_by_a_preloaded_library(sandbox: Sandbox) -> None:
    """Any other program (a shell script here; node, another interpreter) was run unguarded: its connection
    left unwatched and the run passed. Now a preloaded library (harness/env/egress_shim.py) refuses it in the
    script and everything it starts, and the run fails naming host and port."""
    if egress_shim.library() is None:
        pytest.skip("no C compiler builds the preloaded guard (install cc)")
    (sandbox.cwd / "bb.sh").write_text(SHELL_WORKER)
    done = sandbox.run("replay", "--scenario", "crash-points", "--schedule", "charge:checkpoint.writing:kill",
                       "--worker-cmd", "sh bb.sh {run_id}", "--postgres", "local", "--out", str(sandbox.out))
    text = done.stdout + done.stderr
    assert done.returncode == 1, text[-3000:]
    assert "no_egress" in done.stdout and "203.0.113.1:443" in text, text[-3000:]
    assert "egress guard: off" not in text, text[-3000:]
    assert sandbox.survivors() == []


def test_a_worker_cmd_that_is_not_python_reaching_an_allowed_host_passes(sandbox: Sandbox) -> None:
    """The look-alike that is correct: the same script with its host allowed is not refused."""
    if egress_shim.library() is None:
        pytest.skip("no C compiler builds the preloaded guard (install cc)")
    (sandbox.cwd / "bb.sh").write_text(SHELL_WORKER)
    done = sandbox.run("replay", "--scenario", "crash-points", "--schedule", "charge:checkpoint.writing:kill",
                       "--worker-cmd", "sh bb.sh {run_id}", "--postgres", "local", "--allow-egress", "203.0.113.1",
                       "--out", str(sandbox.out))
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    assert "egress blocked" not in done.stdout + done.stderr and "no_egress" not in done.stdout

