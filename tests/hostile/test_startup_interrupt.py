"""Ctrl-C during start-up (issue 29, item 11): the run folder is either whole (meta.json and verdicts.json
beside the history, marked interrupted) or gone, never a history alone."""

from __future__ import annotations

import signal

from tests.helpers.agents import wait_for
from tests.helpers.sandbox import Sandbox


def test_ctrl_c_while_the_session_opens_leaves_no_half_run_folder(sandbox: Sandbox) -> None:
    proc = sandbox.start("replay", "--scenario", "crash-points", "--schedule", "plan:step.start:kill", "--quiet",
                         "--out", str(sandbox.out))
    wait_for(lambda: list(sandbox.out.glob("*/history.jsonl")) or proc.poll() is not None, timeout=120,
             what="the run folder's history")
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=120)
    # 130, or the run's own end when the Ctrl-C landed inside a fork's at-fork hook, where Python ignores the
    # handler's KeyboardInterrupt (a known gap of cli/signals.py, left to its owner): the folder is whole either way
    assert proc.returncode in (130, 0), err[-2000:]
    # (a Ctrl-C that lands inside a fork may add Python's "Exception ignored in _releaseLock" note: cli/signals.py)
    for run_dir in sandbox.out.iterdir() if sandbox.out.exists() else ():
        assert {"meta.json", "verdicts.json"} <= {p.name for p in run_dir.iterdir()}, list(run_dir.iterdir())
    # (not asserted here: a Ctrl-C inside the fork server's own start may leave that server behind until the
    # next start reaps it, env/fork_launcher.py's part)
