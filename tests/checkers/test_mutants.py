"""Detection power: the harness flags every mutant agent (tests/gallery/mutants/) with the right checker, and never
the reference agent.

Each mutant is the reference agent with one of the mistakes the articles warn about. For each, the real CLI
replays the one schedule that catches it, in a subprocess of its own (a runtime mutant patches the reference
runtime at import, in the fork server and in the harness process alike): it must exit 1, name the expected
checker and print the line that replays it. The same schedules on the reference agent must pass, so it is
the mutation that is caught, not the schedule. One full `killpoint run` and one random exploration show
the search finding a mutant by itself, shrinking a multi-fault schedule to a single fault, and the printed
replay line reproducing the failure. Finally the reference agent passes random seeds of every scenario.

Nothing here names a mutant to the harness: the checkers judge properties (effects exactly once, no rewind,
the same context, bounded rework...), so the same checks catch bugs this gallery does not have.
"""

from __future__ import annotations

import dataclasses
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from killpoint.checkers.evidence import Evidence
from killpoint.checkers.process import bounded_rework
from killpoint.env.postgres import PostgresHandle
from killpoint.env.stepmodule import load
from killpoint.events import FaultFired, Point
from killpoint.faults.schedule import Schedule
from killpoint.run.scenario import Context, find, registry
from tests.gallery import mutants as gallery_mutants
from tests.gallery.mutants import BY_NAME, MUTANTS, PREVIOUS_CODE, Mutant
from tests.helpers.checks import REPLAY, cli_args, describe, failing_checkers
from tests.helpers.harness import harness_session
from tests.helpers.sandbox import Sandbox

MUTANTS_DIR = Path(gallery_mutants.__file__).resolve().parent
SCHEDULE = re.compile(r"^\s*schedule:\s+(\S.*)$", re.MULTILINE)

REFERENCE_RANDOM = {"crash-points": 12, "zombie-worker": 4, "deploy-drain": 4, "flaky-services": 4}
"""Random multi-fault schedules the reference agent must pass in-process, per scenario that draws random
schedules (seeds from base seed 11): 24, none may fail; db-crash adds 4 more through the CLI (it needs a
Postgres of its own to crash), 28 in all. The scenarios with fixed plans (schema-upgrade, rollback-refusal,
stalled-sweep, fleet) run their whole `killpoint run` plan instead."""
DB_CRASH_RANDOM = 4


def flags(argv: list[str]) -> dict[str, str]:
    """`replay --flag value ...` as {flag: value} (order does not matter)."""
    assert argv[0] == "replay" and len(argv) % 2 == 1, argv
    return dict(zip(argv[1::2], argv[2::2], strict=True))


# ---- the gallery is what it says ---------------------------------------------------------------------

def test_every_mutant_module_is_catalogued_and_names_its_bug() -> None:
    modules = {p.stem for p in MUTANTS_DIR.glob("*.py") if p.stem != "__init__"}
    previous = {m.rsplit(".", 1)[1] for m in PREVIOUS_CODE}
    assert modules - previous == set(BY_NAME), "a mutant module is missing from the catalog, or the reverse"
    assert len(MUTANTS) == 39
    for m in MUTANTS:
        source = (MUTANTS_DIR / f"{m.name}.py").read_text()
        assert "# BUG:" in source, f"{m.name} does not name its bug in a comment"
        assert m.schedule or "--seed" in m.args, f"{m.name} has no catching trial"


def test_bounded_rework_allows_one_repeated_effect_per_fault_on_a_step() -> None:
    """The property that catches two effects in one step: a replay repeats at most one operation."""
    def point(step: str, name: str, source: str = "worker") -> Point:
        return Point(run_id="r", step=step, point=name, source=source)

    starts = [point("plan", "step.start"), point("charge", "step.start"), point("charge", "step.start")]
    kill = FaultFired(run_id="r", step="charge", point="checkpoint.writing", action="kill")
    other = dataclasses.replace(kill, step="plan", point="checkpoint.committed")
    # each request answered before the next is sent: the client reports effect.responded (one operation each)
    sent = [p for s in ("ledger", "mailer", "ledger", "mailer")
            for p in (point("charge", "effect.received", s), point("charge", "effect.responded"))]
    applied, dedup = {"outcome": "applied"}, {"outcome": "deduplicated"}
    attempts = [{"service": "ledger", **applied}, {"service": "mailer", **applied},
                {"service": "ledger", **dedup}, {"service": "mailer", **dedup}]
    one = Evidence("r", events=[*starts, kill, *sent], attempts=[*attempts[:3], {**attempts[3], **applied}])
    two = Evidence("r", events=[*starts, kill, other, *sent], attempts=attempts)
    assert bounded_rework(one, None).outcome == "pass"
    verdict = bounded_rework(two, None)  # the fault on plan does not excuse a second repeat on charge
    assert verdict.outcome == "fail" and "charge: 2 repeated after 1 fault" in verdict.reason, verdict
    unpaired = Evidence("r", events=[*starts, kill], attempts=attempts)  # no effect.received: run-wide bound
    assert bounded_rework(unpaired, None).outcome == "fail"
    at_once = [point("charge", "effect.received", s) for s in ("ledger", "ledger")]  # two tool calls of one turn
    batch = Evidence("r", events=[*starts, kill, *at_once, *at_once], attempts=[*attempts[:1], attempts[0],
                                                                               *attempts[2:3], attempts[2]])
    assert bounded_rework(batch, None).outcome == "pass", bounded_rework(batch, None)  # one operation repeated


# ---- each mutant is caught, by the right checker, with a replay line ----------------------------------

@pytest.fixture(scope="module")
def caught(pg_server: PostgresHandle, tmp_path_factory: pytest.TempPathFactory) -> dict[str, CompletedProcess[str]]:
    """Every mutant's catching replay, three subprocesses at a time (each on a fresh database)."""
    root = tmp_path_factory.mktemp("caught")  # once: mktemp is not safe from several threads

    def replay(m: Mutant) -> CompletedProcess[str]:
        with Sandbox(root / m.name) as box:
            dsn = pg_server.create_database(f"mut_caught_{m.name}")
            try:
                proc = box.run(*m.replay_args(), "--dsn", dsn, "--allow-any-dsn", timeout=300)
            finally:
                pg_server.drop_database(f"mut_caught_{m.name}")
            assert not box.survivors(), f"{m.name}: the harness left processes behind"
        return proc

    with ThreadPoolExecutor(max_workers=3) as pool:
        return dict(zip(BY_NAME, pool.map(replay, MUTANTS), strict=True))


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_mutant_is_caught_by_its_checker(mutant: Mutant, caught: dict[str, CompletedProcess[str]]) -> None:
    proc = caught[mutant.name]
    assert proc.returncode == 1, describe(proc)
    assert mutant.checker in failing_checkers(proc.stdout), describe(proc)
    lines = REPLAY.findall(proc.stdout)
    assert lines and all(f"--steps {mutant.module}" in line for line in lines), describe(proc)
    # the printed line is the very command that was run: pasting it reproduces the failure
    assert flags(cli_args(lines[0])) == flags(mutant.replay_args()), describe(proc)


def test_the_catching_schedules_pass_on_the_reference_agent(pg_server: PostgresHandle, tmp_path: Path) -> None:
    """The same trials on the reference agent (or the mutant's correct control) pass: the mutation is what is
    caught, not the schedule."""
    with harness_session(pg_server, tmp_path / "runs", "mut_reference_catching") as s:
        base_options, reference = s.options, s.agent.module
        for m in MUTANTS:
            scenario = find(m.scenario)
            args = dict(zip(m.args[::2], m.args[1::2], strict=True))
            s.options = dataclasses.replace(base_options, grace=float(args.get("--grace", base_options.grace)))
            ctx = Context(session=s, previous_steps=args.get("--previous-steps"))
            s.agent = load(m.control or reference)  # a loop's later pass is reached by a correct loop only
            if m.schedule:
                trial = scenario.trial(ctx, Schedule.parse(m.schedule, s.agent.steps))
            else:
                seed = int(args["--seed"])
                trial = scenario.trial(ctx, Schedule.from_seed(seed, scenario.step_points(ctx),
                                                               actions=scenario.actions), seed)
            assert trial.outcome == "pass", (m.name, m.scenario, m.schedule, trial.failing())


# ---- the search finds mutants by itself, shrinks, and its replay line reproduces -----------------------

def test_run_finds_a_mutant_and_its_printed_replay_reproduces(sandbox: Sandbox, dsn_args: list[str]) -> None:
    """`killpoint run` on a mutant exits 1 naming the checker, and the printed replay line (which carries the
    grace period the failing trial used) reproduces the failure with the same checker."""
    mutant = BY_NAME["drain_over_grace"]
    proc = sandbox.run("run", "--scenario", mutant.scenario, "--steps", mutant.module, *dsn_args, timeout=300)
    assert proc.returncode == 1, describe(proc)
    assert mutant.checker in failing_checkers(proc.stdout), describe(proc)
    line = REPLAY.findall(proc.stdout)[0]
    assert "--grace" in line, line
    again = sandbox.run(*cli_args(line), *dsn_args, timeout=120)
    assert again.returncode == 1, describe(again)
    assert mutant.checker in failing_checkers(again.stdout), describe(again)
    assert not sandbox.survivors(), "the harness left processes behind"


def test_a_correct_agent_that_replaces_the_sweepers_enqueue_passes(sandbox: Sandbox, dsn_args: list[str]) -> None:
    """The look-alike of the sweeper mutants (sweeper_no_dedupe, resume_id_per_sweep, resume_upserted): its
    module also replaces the runtime's `enqueue_resume` at import, in the harness's process too (where
    stalled-sweep races the sweepers), but keeps the dedupe: the same catching trial passes."""
    schedule = BY_NAME["resume_upserted"].schedule
    proc = sandbox.run("replay", "--scenario", "stalled-sweep", "--schedule", schedule, "--steps",
                       "tests.gallery.variants.sweeper_counted", *dsn_args, timeout=120)
    assert proc.returncode == 0, describe(proc)
    assert re.search(r"^PASS\s+stalled-sweep\s+1 schedules .* 1 resume jobs", proc.stdout, re.MULTILINE), describe(proc)
    assert not sandbox.survivors(), "the harness left processes behind"


def test_random_exploration_shrinks_to_a_single_fault(sandbox: Sandbox, dsn_args: list[str]) -> None:
    """Random multi-fault schedules find a mutant; the failure is shrunk to one fault, and that minimal
    schedule's replay line reproduces it."""
    mutant = BY_NAME["no_key"]
    proc = sandbox.run("explore", "--scenario", mutant.scenario, "--random", "3", "--seed", "5",
                       "--steps", mutant.module, *dsn_args, timeout=300)
    assert proc.returncode == 1, describe(proc)
    tried = re.findall(r"random \[\d+/3\] seed \d+ (\S+) -> fail", proc.stderr)
    assert any("," in s for s in tried), "no multi-fault schedule failed: pick another seed\n" + describe(proc)
    shrunk = SCHEDULE.findall(proc.stdout)[0]  # failures print fewest faults first: the shrunk one leads
    assert "," not in shrunk, f"not shrunk to a single fault: {shrunk}\n" + describe(proc)
    line = REPLAY.findall(proc.stdout)[0]
    assert f"--schedule '{shrunk}'" in line
    assert proc.stdout.rstrip().splitlines()[-1].strip() == line, "the output does not end with the replay line"
    again = sandbox.run(*cli_args(line), *dsn_args, timeout=120)
    assert again.returncode == 1 and mutant.checker in failing_checkers(again.stdout), describe(again)
    assert not sandbox.survivors(), "the harness left processes behind"


# ---- the reference agent is never flagged ------------------------------------------------------------

def test_reference_agent_passes_random_seeds_of_every_scenario(pg_server: PostgresHandle, tmp_path: Path) -> None:
    """24 random multi-fault schedules over the scenarios that draw them, and the fixed plans of the
    others, all pass on the reference agent (the negative control is left out: it is meant to fail; db-crash
    is the next test's)."""
    assert set(REFERENCE_RANDOM) <= set(registry())
    failures, randoms = [], 0
    with harness_session(pg_server, tmp_path / "runs", "mut_reference_random") as s:
        for name, scenario in registry().items():
            if scenario.expected_finding:
                continue
            ctx = Context(session=s, seed=11)
            if scenario.skip_reason(ctx) is not None:
                continue
            count = REFERENCE_RANDOM.get(name)
            trials = scenario.random(ctx, count) if count else scenario.run(ctx)
            assert len(trials) == count if count else trials, name
            randoms += count or 0
            failures += [(name, str(t.schedule), t.seed, [v.checker for v in t.failing()])
                         for t in trials if t.outcome != "pass"]
    assert randoms == sum(REFERENCE_RANDOM.values()) == 28 - DB_CRASH_RANDOM
    assert not failures


def test_reference_agent_passes_random_db_crashes(sandbox: Sandbox) -> None:
    """db-crash crashes the Postgres it owns: through the CLI, on a server of the harness's own."""
    proc = sandbox.run("explore", "--scenario", "db-crash", "--random", str(DB_CRASH_RANDOM), "--seed", "11",
                       "--postgres", "local", timeout=300)
    assert proc.returncode == 0, describe(proc)
    assert re.search(rf"^PASS\s+db-crash\s+{DB_CRASH_RANDOM} schedules", proc.stdout, re.MULTILINE), describe(proc)
    assert not sandbox.survivors(), "the harness left processes behind"
