"""db-crash: on the reference agent, Postgres killed inside the checkpoint transaction or just after its
commit, at every step, then restarted, loses no committed checkpoint; the run completes exactly once. An
agent writing its own row outside the checkpoint's transaction fails. On a database killpoint does not
own, `killpoint run` reports the scenario skipped, with the reason."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from killpoint.env.postgres import PostgresHandle
from killpoint.faults.schedule import Schedule
from killpoint.run.scenario import Context, ScenarioResult
from killpoint.run.trial import Session, Trial
from killpoint.scenarios.db_crash import DbCrash
from tests.helpers.checks import describe
from tests.helpers.sandbox import Sandbox
from tests.helpers.scenarios import failing, module_outcome, owned_session, why


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    with owned_session(tmp_path_factory.mktemp("db-crash")) as s:
        yield s


outcome = module_outcome(DbCrash)


def test_the_reference_agent_survives_a_crash_at_every_checkpoint(
        outcome: tuple[list[Trial], ScenarioResult]) -> None:
    trials, result = outcome
    assert result.outcome == "pass", why(trials)
    assert {str(t.schedule) for t in trials} == {f"{s}:checkpoint.{p}:db-crash" for s in
                                                 ("plan", "validate", "charge", "email", "record")
                                                 for p in ("writing", "committed")}
    assert result.figures == "10 crashes, 10 restarts"
    for t in trials:
        kinds = [e["type"] for e in t.evidence.events if e["type"] in ("fault", "db.down", "db.up")]
        assert kinds == ["fault", "db.down", "db.up"], (t.schedule, kinds)
        crashed, *rest = t.evidence.incarnations
        if str(t.schedule) == "record:checkpoint.committed:db-crash":  # done and durable: nothing left to do
            assert crashed["exit_code"] == 0 and not rest, t.evidence.incarnations
        else:  # it lost its connection with work left: an error, and another incarnation resumes
            assert crashed["exit_code"] == 1 and rest, (t.schedule, t.evidence.incarnations)
        survive = next(v for v in t.verdicts if v.checker == "commits_survive")
        assert survive.outcome == "pass" and "1 crash" in survive.reason


def test_an_effect_outside_the_checkpoint_transaction_fails(session: Session) -> None:
    scenario = DbCrash()
    scenario.steps = "tests.gallery.variants.record_autocommit"
    trial = scenario.trial(Context(session=session), Schedule.parse("record:checkpoint.writing:db-crash"))
    assert trial.outcome == "fail", why([trial])
    assert "completes" in failing(trial), why([trial])  # the resumed record fails on the row it left behind


def test_on_a_database_it_does_not_own_the_scenario_is_skipped(pg_server: PostgresHandle,
                                                                sandbox: Sandbox) -> None:
    dsn = pg_server.create_database("t_scenario_db_crash_dsn")
    try:
        dsn_args = ("--dsn", dsn, "--allow-any-dsn", "--out", str(sandbox.out))
        procs = [sandbox.run("run", "--scenario", "db-crash", *dsn_args),
                 sandbox.run("replay", "--scenario", "db-crash", "--schedule", "plan:checkpoint.writing:db-crash",
                             *dsn_args)]
        survivors = sandbox.survivors()
    finally:
        pg_server.drop_database("t_scenario_db_crash_dsn")
    for proc in procs:  # the only scenario asked for skipped: nothing was tested, never exit 0
        assert proc.returncode == 2 and "error[nothing-tested]" in proc.stderr, describe(proc)
        line = next(ln for ln in proc.stdout.splitlines() if "db-crash" in ln and "schedules" in ln)
        assert line.startswith("SKIP") and "not killpoint's to crash" in line, line  # never a PASS
    assert survivors == []
