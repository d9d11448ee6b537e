"""Interruptions (issue 13, item 7): Ctrl-C and SIGTERM write `verdicts.json` with the findings so far and an
`interrupted` mark, print the replay lines of failures already found, and a burst of signals still ends
cleanly, leaving nothing behind."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from tests.helpers.agents import wait_for
from tests.helpers.sandbox import Sandbox

MUTANT = "tests.gallery.mutants.no_key"  # replays its charge and email: a fault at effect.responded fails
SLOW_MUTANT = "tests.gallery.variants.slow_no_key"  # the same, each trial 1 s longer: still running when interrupted


def _failed_trial(sandbox: Sandbox) -> bool:
    """True once a history under the sandbox's out holds a failing verdict."""
    return any(e.get("type") == "verdict" and e.get("outcome") == "fail" for e in sandbox.events())


def _run_dir(sandbox: Sandbox) -> Path:
    (run_dir,) = list(sandbox.out.iterdir())
    return run_dir


@pytest.mark.parametrize(("sig", "code", "by", "burst"), [
    (signal.SIGINT, 130, "SIGINT", 1),
    (signal.SIGTERM, 143, "SIGTERM", 1),
    (signal.SIGINT, 130, "SIGINT", 6),
], ids=["ctrl-c", "sigterm", "ctrl-c-burst"])
def test_interrupted_run_keeps_its_findings(sandbox: Sandbox, sig: signal.Signals, code: int, by: str,
                                            burst: int) -> None:
    proc = sandbox.start("run", "--scenario", "crash-points", "--steps", MUTANT, "--quiet", "--out", str(sandbox.out))
    try:
        wait_for(lambda: _failed_trial(sandbox) or proc.poll() is not None, timeout=240, what="a failing trial")
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the run ended (exit {proc.returncode}) before it could be interrupted:\n"
                                 f"{out[-3000:]}\n{err[-2000:]}")
        for _ in range(burst):  # a burst: the first stops the run, the rest must not cut its cleanup short
            proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == code, (proc.returncode, err[-2000:])
    assert "Traceback" not in err, err[-3000:]
    run_dir = _run_dir(sandbox)
    verdicts = json.loads((run_dir / "verdicts.json").read_text())
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["interrupted"] == by
    (current,) = [r for r in verdicts if r["scenario"] == "crash-points"]
    assert current["outcome"] == "interrupted" and by in current["reason"]
    failed = [t for t in current["trials"] if t["outcome"] == "fail"]
    assert failed, current
    # every trial judged before the signal is listed whole (a passing one's verdicts read back from the spool)
    assert f"after {len(current['trials'])} trials" in current["reason"], current["reason"]
    assert all(t["verdicts"] and t["run_id"] and t["schedule"] for t in current["trials"]), current
    assert f"interrupted by {by}" in out
    replay = [ln for ln in out.splitlines() if "replay: killpoint replay --scenario crash-points" in ln]
    assert replay and f"--steps {MUTANT}" in replay[0], out[-3000:]
    assert any(e == {"type": "session.interrupted", "by": by} or
               (e.get("type") == "session.interrupted" and e.get("by") == by)
               for e in map(json.loads, (run_dir / "history.jsonl").read_text().splitlines()))
    assert sandbox.survivors() == []
    assert sandbox.leftover_dirs() == []


def test_the_printed_replay_line_of_an_interrupted_run_reproduces_the_failure(sandbox: Sandbox) -> None:
    proc = sandbox.start("run", "--scenario", "crash-points", "--steps", MUTANT, "--quiet", "--out", str(sandbox.out))
    try:
        wait_for(lambda: _failed_trial(sandbox) or proc.poll() is not None, timeout=240, what="a failing trial")
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    line = next(ln for ln in out.splitlines() if "replay: killpoint replay" in ln).split("replay: ", 1)[1]
    import shlex

    argv = shlex.split(line)[1:]
    again = subprocess.run(sandbox.argv(*argv, "--quiet", "--out", str(sandbox.out)), capture_output=True,
                           text=True, cwd=sandbox.cwd, env=sandbox.env(), timeout=300, stdin=subprocess.DEVNULL)
    assert again.returncode == 1 and "FAIL" in again.stdout, again.stdout[-2000:] + again.stderr[-2000:]
    assert sandbox.survivors() == []


def _judged(sandbox: Sandbox, scenario: str) -> bool:
    """True once a history under the sandbox's out holds a verdict of one of `scenario`'s runs."""
    return any(e.get("type") == "verdict" and str(e.get("run_id", "")).startswith(f"{scenario}-")
               for e in sandbox.events())


def test_a_ctrl_c_stops_scenarios_running_side_by_side_and_keeps_each_ones_findings(sandbox: Sandbox) -> None:
    """Two scenarios side by side (`-j 2`, `run.side_by_side`) when Ctrl-C comes: both end `interrupted`, each
    with the trials of its own run ids, the failure found so far printed with its replay line, nothing left."""
    proc = sandbox.start("run", "--scenario", "crash-points", "--scenario", "zombie-worker", "--steps", SLOW_MUTANT,
                         "-j", "2", "--quiet", "--out", str(sandbox.out))
    try:
        wait_for(lambda: (_failed_trial(sandbox) and _judged(sandbox, "zombie-worker")) or proc.poll() is not None,
                 timeout=240, what="a failing trial and a judged zombie-worker trial")
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, (proc.returncode, err[-2000:])
    assert "Traceback" not in err, err[-3000:]
    verdicts = {r["scenario"]: r for r in json.loads((_run_dir(sandbox) / "verdicts.json").read_text())}
    for name in ("crash-points", "zombie-worker"):
        assert verdicts[name]["outcome"] == "interrupted", verdicts[name]
        trials = verdicts[name]["trials"]
        assert trials and all(t["run_id"].startswith(f"{name}-") for t in trials), (name, trials)
    failing = [name for name, r in verdicts.items() if any(t["outcome"] == "fail" for t in r["trials"])]
    assert failing and all(f"replay: killpoint replay --scenario {name}" in out for name in failing), out[-3000:]
    assert sandbox.survivors() == []
    assert sandbox.leftover_dirs() == []
