"""On the command line: the base seed is printed first (random unless --seed), a remembered failing schedule
is replayed first on the next run of the same agent (and stays remembered while it fails), `--no-store`
turns that off, and progress comes as plain lines when the output is not a terminal."""

from __future__ import annotations

import json
import re

from killpoint.env.stepmodule import load
from killpoint.faults.schedule import Schedule
from killpoint.run.store import FailureStore
from tests.helpers.checks import describe
from tests.helpers.harness import BROKEN_AGENT
from tests.helpers.sandbox import Sandbox

FATAL = "email:effect.applied:kill"


def test_a_stored_failure_is_replayed_first_and_no_store_turns_it_off(sandbox: Sandbox, pg_dsn: str) -> None:
    store = FailureStore(sandbox.cwd / ".killpoint" / "failures")
    store.update(load(BROKEN_AGENT), "crash-points", [Schedule.parse(FATAL)], [])
    args = ("explore", "--scenario", "crash-points", "--random", "1", "--steps", BROKEN_AGENT, "--dsn", pg_dsn,
            "--out", str(sandbox.out))
    first = sandbox.run(*args)
    assert first.returncode == 1, describe(first)
    assert re.match(r"base seed \d+ \(random; repeat this run with --seed \d+\)\n", first.stdout), describe(first)
    lines = [line for line in first.stderr.splitlines() if line.startswith("crash-points:")]
    assert lines[0] == f"crash-points: stored failure [1/1] {FATAL} -> fail", describe(first)
    assert any(re.match(r"crash-points: 1/1 trials, \d+ failures? so far, elapsed \d+s, eta 0s", x) for x in lines)
    assert f"schedule: {FATAL}" in first.stdout
    assert FATAL in json.loads(store.path(load(BROKEN_AGENT)).read_text())["crash-points"]  # still failing: kept

    off = sandbox.run(*args, "--no-store", "--seed", "7")
    assert off.stdout.startswith("base seed 7 (fixed by --seed"), describe(off)
    assert "stored failure" not in off.stderr, describe(off)
