"""A worker the database refused a connection for want of slots (`checkers.refused`): the run's failing
verdicts are UNKNOWN naming the refusal, never FAIL, whichever limit refused it (max_connections, the reserved
slots, a role's or a database's CONNECTION LIMIT) and whichever driver said so; the server's other endings (a
db-crash, which killpoint injects) are judged as before; a crash-free run refused so is an unknown, not a
failing agent. The agent of the end-to-end test has its own steps and table and no model call."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from killpoint.checkers import Evidence, run_checkers
from killpoint.checkers.verdict import failed, passed
from killpoint.run.evidence import refusals
from killpoint.run.trial import crash_free_failure
from tests.helpers.checks import describe
from tests.helpers.sandbox import Sandbox

REPO = Path(__file__).resolve().parents[2]
TRACE = ["Traceback (most recent call last):", '  File "worker.py", line 9, in report']
REFUSED = {
    "max_connections": 'psycopg.OperationalError: connection failed: connection to server at "127.0.0.1", port 5432 '
                       "failed: FATAL:  sorry, too many clients already",
    "reserved": "psycopg.OperationalError: connection failed: FATAL:  remaining connection slots are reserved for "
                "roles with the SUPERUSER attribute",
    "role": 'sqlalchemy.exc.OperationalError: (psycopg.OperationalError) connection failed: FATAL:  too many '
            'connections for role "dbos"',
    "database": 'asyncpg.exceptions.TooManyConnectionsError: too many connections for database "shop"',
}
INJECTED = {
    "db-crash": 'psycopg.OperationalError: connection failed: connection to server at "127.0.0.1", port 5432 failed: '
                "Connection refused",
    "db-crash-mid-query": "psycopg.errors.AdminShutdown: terminating connection due to administrator command",
    "restarting": "psycopg.OperationalError: connection failed: FATAL:  the database system is starting up",
}


def died(*lines: str) -> Evidence:
    return Evidence("crash-points-4", crashes={"crash-points-4#2": {"log": "w.log", "exit_code": 1,
                                                                      "tail": [*TRACE, *lines]}})


def judged(ev: Evidence) -> dict[str, tuple[str, str]]:
    checkers = [lambda e, b: failed("completes", "not done"), lambda e, b: passed("no_rewind"),
                lambda e, b: failed("exactly_once", "effects done twice")]
    return {v.checker: (v.outcome, v.reason) for v in run_checkers(checkers, ev, None)}


@pytest.mark.parametrize("limit", sorted(REFUSED))
def test_a_run_whose_worker_was_refused_a_connection_is_unknown_not_failed(limit: str) -> None:
    out = judged(died(REFUSED[limit]))
    assert out["completes"][0] == "unknown" and REFUSED[limit][-40:] in out["completes"][1]
    assert out["completes"][1].startswith("the database refused crash-points-4#2 a connection (")
    assert out["exactly_once"] == ("unknown", "the database refused crash-points-4#2 a connection (see completes)")
    assert out["no_rewind"][0] == "pass"  # what passed still stands


@pytest.mark.parametrize("ending", sorted(INJECTED))
def test_the_servers_other_endings_are_judged_as_before(ending: str) -> None:
    out = judged(died(INJECTED[ending]))
    assert out["completes"] == ("fail", "not done") and out["exactly_once"] == ("fail", "effects done twice")
    assert judged(Evidence("crash-points-5"))["completes"] == ("fail", "not done")


def test_a_crash_free_run_refused_a_connection_is_an_unknown() -> None:
    refused = crash_free_failure("stock", died(REFUSED["max_connections"]))
    assert refused is not None and refused.starved.startswith("the database refused crash-points-4#2")
    crashed = crash_free_failure("stock", died(INJECTED["db-crash"]))
    assert crashed is not None and crashed.starved == ""


def test_a_worker_not_in_python_that_logged_a_refusal_and_exited_is_one_too(tmp_path: Path) -> None:
    """A Go worker (pgx) that logs the error and exits 1 leaves no traceback: what it last wrote says it."""
    def worker(name: str, text: str, exit_code: int, sig: int | None = None) -> SimpleNamespace:
        log = tmp_path / f"{name}.log"
        log.write_text(text)
        return SimpleNamespace(inc=name, log=str(log), exit_code=exit_code, signal=sig)

    go = "2026/12/05 13:10:02 connect: FATAL: sorry, too many clients already (SQLSTATE 53300)\n"
    incs = [worker("run-1#1", "step charge\n", 0), worker("run-1#2", go, 1), worker("run-1#3", go, None, 9),
            worker("run-1#4", "fenced: lease lost\n", 5), worker("run-1#5", go, 1)]
    found = refusals(incs, shown={"run-1#5": {}})  # #5 died of an exception: its traceback is read instead
    assert found == {"run-1#2": go.strip()}
    out = judged(Evidence("run-1", refused=found))
    assert out["completes"][0] == "unknown" and "the database refused run-1#2 a connection (2026/12/05" in out["completes"][1]


@pytest.mark.slow  # one CLI replay
def test_a_resumed_worker_refused_by_a_full_role_is_unknown_through_the_cli(sandbox: Sandbox) -> None:
    """tests/gallery/variants/reporting_role.py: its resumed `report` connects as a role whose CONNECTION LIMIT
    is 0. Before `checkers.refused` this was FAIL (completes: the run never finished)."""
    proc = sandbox.run("replay", "--scenario", "crash-points", "--steps", "tests.gallery.variants.reporting_role",
                       "--schedule", "report:checkpoint.writing:kill", path_first=(REPO,))
    assert proc.returncode == 1, describe(proc)
    assert "UNKNOWN: crash-points run crash-points-1" in proc.stdout and "FAIL" not in proc.stdout, describe(proc)
    assert 'completes: unknown: the database refused crash-points-1#2 a connection (' in proc.stdout
    assert 'too many connections for role "kp_reporting"' in proc.stdout
    assert sandbox.survivors() == [] and sandbox.leftover_dirs() == []
