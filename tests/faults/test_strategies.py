"""Hypothesis strategies for schedules: every drawn schedule is valid, failures shrink to fewer and earlier
faults, hypothesis is imported lazily, and the documented `@given` example runs as a user's test."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from hypothesis import find, given, settings

from killpoint.faults import strategies
from killpoint.faults.schedule import Schedule
from killpoint.faults.strategies import candidates, schedules
from killpoint.run.points import crash_free_points, crash_free_run, single_faults
from tests.helpers.inner_pytest import inner_pytest

POINTS = {"plan": ["step.start", "model.request", "checkpoint.writing", "checkpoint.committed"],
          "charge": ["step.start", "effect.received", "effect.applied", "effect.responded", "checkpoint.committed"],
          "email": ["step.start", "effect.received", "effect.applied", "effect.responded", "checkpoint.committed"]}


@settings(max_examples=200, deadline=None)
@given(schedules(POINTS, max_faults=3))
def test_every_drawn_schedule_is_valid(schedule: Schedule) -> None:
    assert 1 <= len(schedule) <= 3
    assert Schedule.parse(str(schedule), POINTS) == schedule  # parses back, no two faults at one occurrence
    pool = set(candidates(POINTS))
    assert all((f.step, f.point, f.action) in pool for f in schedule)


def test_a_failure_shrinks_to_one_fault_at_the_earliest_point() -> None:
    def touches_email(s: Schedule) -> bool:
        return any(f.step == "email" for f in s)

    # derandomized: the same examples every run, so the shrunk result does not depend on a lucky draw
    found = find(schedules(POINTS), touches_email,
                 settings=settings(database=None, max_examples=500, derandomize=True))
    assert str(found) == "email:step.start:kill"  # fewest faults, earliest point of the step, kill first
    found = find(schedules(POINTS), lambda s: any(f.point == "effect.applied" and f.action == "term" for f in s),
                 settings=settings(database=None, max_examples=500, derandomize=True))
    assert str(found) == "charge:effect.applied:term"  # the earliest step that has the point


def test_importing_the_module_does_not_import_hypothesis() -> None:
    code = "import sys, killpoint.faults.strategies; sys.exit('hypothesis' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


LOOP = {"charge": {"effect.applied": 3, "checkpoint.committed": 3}}
"""`charge` visited three times (a loop): its later passes are drawn too."""


@settings(max_examples=200, deadline=None)
@given(schedules(POINTS, max_faults=3, occurrences=LOOP))
def test_a_loops_later_passes_are_drawn_and_every_schedule_stays_valid(schedule: Schedule) -> None:
    assert Schedule.parse(str(schedule), POINTS) == schedule
    for f in schedule.faults:
        reached = LOOP.get(f.step, {}).get(f.point, 1)
        earlier = sum(1 for g in schedule.faults if (g.step, g.point) == (f.step, f.point)) - 1
        assert f.nth <= reached + earlier  # a first fault within the passes; a repeat one further


def later_pass(schedule: Schedule) -> bool:
    """A fault at a later pass of a loop, the only one on its point (not a resumed incarnation's repeat)."""
    points = [(f.step, f.point) for f in schedule.faults]
    return any(f.nth >= 2 and points.count((f.step, f.point)) == 1 for f in schedule.faults)


def test_a_failure_at_a_later_pass_shrinks_to_one_fault_at_the_earliest_such_point() -> None:
    found = find(schedules(POINTS, max_faults=3, occurrences=LOOP), later_pass,
                 settings=settings(database=None, max_examples=500, derandomize=True))
    assert str(found) == "charge:effect.applied:kill@2"


def documented_example() -> str:
    doc = strategies.__doc__ or ""
    block = doc.split("A complete test (this is the example `tests/faults/test_strategies.py` runs):", 1)[1]
    return textwrap.dedent(block.split("\n\n(`explicit=False`", 1)[0])


def test_the_documented_given_example_runs_as_a_users_test(tmp_path: Path, pg_dsn: str) -> None:
    steps = "killpoint.reference_agent.invoice_agent"
    crash_free_points(steps, dsn=pg_dsn, cache=tmp_path / "cache" / "points")  # what the example's first draw reads
    (tmp_path / "test_example.py").write_text(documented_example())
    out = inner_pytest(tmp_path, pg_dsn, steps, "-q")
    assert "1 passed" in out.stdout, out.stdout + out.stderr
    runs = list((tmp_path / "runs").iterdir())
    trials = [t for r in json.loads((runs[0] / "verdicts.json").read_text()) for t in r["trials"]]
    assert trials and all(t["schedule"] and t["outcome"] == "pass" for t in trials), trials


def test_a_loops_later_passes_are_measured_cached_and_made_single_faults(tmp_path: Path, pg_dsn: str) -> None:
    """`crash_free_run` measures, with the points, how often a loop's step reached each point (the
    installments: `charge` twice); both come from one cache file, so the second call runs nothing, and
    `single_faults` faults each pass (what `killpoint_schedule` parametrizes over)."""
    steps, cache = "tests.corpus.installments", tmp_path / "cache" / "points"
    points = crash_free_points(steps, dsn=pg_dsn, cache=cache)
    [stored] = cache.glob("*.v2.json")
    stored.write_text(stored.read_text().replace('"charge": {', '"charge": {"cached": 9, '))  # read, not measured
    occurrences = crash_free_run(steps, dsn="postgresql://nobody@127.0.0.1:1/none", cache=cache)[1]
    assert occurrences["charge"].pop("cached") == 9
    assert occurrences == {"charge": dict.fromkeys(points["charge"], 2)}
    faults = [str(s) for s in single_faults(points, ("kill",), occurrences)]
    assert "charge:effect.applied:kill@2" in faults and "email:effect.applied:kill@2" not in faults
    assert len(faults) == sum(map(len, points.values())) + len(points["charge"])
