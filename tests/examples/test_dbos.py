"""examples/dbos: an invoice workflow on DBOS, crash-tested as written, through the CLI with `--adapter dbos`:
the bare email's duplicate is found by exactly_once with a replay line that reproduces it; the keyed email
passes `killpoint run` (every applicable scenario) with no UNKNOWN; every run has an executor id of its own;
a Resend outage that outlasts the email step's retries leaves the workflow to be resumed (the example as
written passes), while one that ends it ERROR (`--dbos-retries`) fails `completes`; on a `--dsn` database, DBOS's `dbos` schema lives in a database of the session's own, dropped at its end."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import psycopg
import pytest

from killpoint.env.postgres import PostgresHandle

pytest.importorskip("dbos", reason="dbos is not installed: pip install 'killpoint[dbos]'")
pytest.importorskip("resend", reason="the resend SDK is not installed: pip install 'killpoint[dbos]'")

from tests.examples.forked import assert_fork_matches_exec  # noqa: E402
from tests.examples.frameworks import assert_duplicate_found, assert_keyed_passes, cli, run_dirs, worker_cmd  # noqa: E402
from tests.helpers.checks import describe, failing_checkers  # noqa: E402

EXAMPLE = "dbos/invoice_workflow.py"


def test_bare_email_duplicate_is_found_and_its_replay_reproduces_it(sandbox):
    assert_duplicate_found(sandbox, "dbos", EXAMPLE)


def test_forked_incarnations_give_the_verdicts_of_exec_d_ones(sandbox):
    """The bare workflow killed after Resend applied the email: forked from servers that preloaded DBOS,
    the duplicate is found with the same verdicts as when every incarnation is exec'd."""
    found = assert_fork_matches_exec(sandbox, "dbos", EXAMPLE, "crash-points", "email:effect.applied:kill")
    (trial,) = [t for r in found for t in r["trials"]]
    assert trial["outcome"] == "fail" and any(v["checker"] == "exactly_once" and v["outcome"] == "fail"
                                              for v in trial["verdicts"]), trial


def test_each_run_has_an_executor_id_of_its_own(sandbox):
    """Two runs of one session never share a DBOS executor: each workflow was run by the executor named
    after its own run id (so DBOS's recovery at launch never picks up another run's workflow)."""
    proc = cli(sandbox, "replay", "--scenario", "crash-points", "--schedule", "email:effect.applied:kill",
               "--adapter", "dbos", "--worker-cmd", worker_cmd(EXAMPLE, keyed=True))
    assert proc.returncode == 0, describe(proc)
    (run_dir,) = run_dirs(sandbox)
    events = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    finals = {e["run_id"]: e["final"] for e in events if e["type"] == "run.evidence"}
    assert len(finals) >= 3, finals  # two crash-free runs and the faulted one
    for run_id, final in finals.items():
        assert final["executor_id"] == run_id, (run_id, final)


@pytest.mark.parametrize("schedule", ["email:effect.received:outage", "email:effect.received:outage=5"])
def test_an_outage_longer_than_the_steps_retries_is_ridden_out_not_given_up_on(sandbox, schedule):
    """The example exits with the workflow PENDING when Resend is still down after its retries, and the next
    incarnation sends the email; the same workflow with the step retried by DBOS (`--dbos-retries`) ends
    ERROR for good (the invoice never sent), which `completes` fails and the replay line reproduces."""
    given_up = cli(sandbox, "replay", "--scenario", "flaky-services", "--schedule", schedule, "--adapter", "dbos",
                   "--worker-cmd", worker_cmd(EXAMPLE, keyed=True) + " --dbos-retries")
    assert given_up.returncode == 1, describe(given_up)
    assert "completes" in failing_checkers(given_up.stdout), describe(given_up)
    assert "DBOSMaxStepRetriesExceeded" in given_up.stdout, describe(given_up)
    ridden_out = cli(sandbox, "replay", "--scenario", "flaky-services", "--schedule", schedule, "--adapter", "dbos",
                     "--worker-cmd", worker_cmd(EXAMPLE, keyed=True))
    assert ridden_out.returncode == 0, describe(ridden_out)
    assert re.search(r"^PASS\s+flaky-services\s", ridden_out.stdout, re.MULTILINE), describe(ridden_out)
    assert not sandbox.survivors(), sandbox.survivors()


@pytest.mark.slow
def test_keyed_email_passes_the_whole_suite(sandbox):
    outcomes = assert_keyed_passes(sandbox, "dbos", EXAMPLE)
    # the workflow asks no model: a sampling model has nothing to answer differently (it once ran kills alone)
    assert outcomes["sampling-model"] == "SKIP", outcomes
    (run_dir,) = run_dirs(sandbox)
    (sampling,) = [r for r in json.loads((run_dir / "verdicts.json").read_text()) if r["scenario"] == "sampling-model"]
    assert "made no request to the model" in sampling["reason"] and not sampling["trials"], sampling


@pytest.fixture
def user_db(pg_server: PostgresHandle) -> Iterator[str]:
    """A user's database on the test session's Postgres, named by `--dsn`."""
    dsn = pg_server.create_database("dbos_user_test")
    yield dsn
    pg_server.drop_database("dbos_user_test")


def test_on_a_dsn_database_dboss_schema_goes_in_a_session_database_that_is_dropped(sandbox, user_db):
    """DBOS creates its system tables in schema `dbos` by name, whatever the search path: on a `--dsn`
    database the session moves to a database of its own (`test_killpoint_s_<hex>` on the same server), where
    the adapter reads DBOS's records (the run passes), and which is dropped at the end: the user's database
    keeps no `dbos` schema and no session schema, and the server no session database."""
    with psycopg.connect(user_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE invoices (id int)")  # the user's own table, which must stay untouched
    proc = cli(sandbox, "replay", "--scenario", "crash-points", "--schedule", "email:effect.applied:kill",
               "--adapter", "dbos", "--worker-cmd", worker_cmd(EXAMPLE, keyed=True), "--dsn", user_db,
               "--allow-any-dsn")
    assert proc.returncode == 0, describe(proc)
    (run_dir,) = run_dirs(sandbox)
    events = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    finals = [e["final"] for e in events if e["type"] == "run.evidence"]
    assert len(finals) >= 3 and all(f["state"]["status"] == "SUCCESS" for f in finals), finals
    with psycopg.connect(user_db, autocommit=True) as conn:
        schemas = {r[0] for r in conn.execute("SELECT nspname FROM pg_namespace").fetchall()}
        databases = [r[0] for r in conn.execute("SELECT datname FROM pg_database WHERE datname LIKE 'test_killpoint_s_%'")]
        assert conn.execute("SELECT to_regclass('public.invoices') IS NOT NULL").fetchone() == (True,)
    assert "dbos" not in schemas and not any(s.startswith("killpoint_s_") for s in schemas), schemas
    assert databases == [], databases
    assert "left behind" not in proc.stdout + proc.stderr, describe(proc)
    assert not sandbox.survivors(), sandbox.survivors()
