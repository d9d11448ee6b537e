"""A user's `--dsn` database that refuses what a session does there, and an agent whose first state is no
dict (issue 29, item 9): one line naming the fix, exit 2 for the user's database, never a traceback."""

from __future__ import annotations

import textwrap

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from tests.helpers.sandbox import Sandbox

REPLAY = ("replay", "--scenario", "crash-points", "--schedule", "plan:step.start:kill", "--quiet")

HOSTILE_DATABASES: dict[str, tuple[tuple[str, ...], str]] = {
    # name: (SQL run in the user's database first, the error code)
    "read-only-database": (("ALTER DATABASE {db} SET default_transaction_read_only = on",), "dsn-read-only"),
    "event-trigger-forbids-ddl": (("CREATE FUNCTION no_ddl() RETURNS event_trigger LANGUAGE plpgsql AS "
                                   "$$ BEGIN RAISE EXCEPTION 'DDL is forbidden in this database'; END $$",
                                   "CREATE EVENT TRIGGER no_ddl ON ddl_command_start EXECUTE FUNCTION no_ddl()"),
                                  "dsn-unusable"),
    "statement-timeout-tiny": (("ALTER DATABASE {db} SET statement_timeout = 1",), "dsn-unusable"),
    "search-path-nowhere": (("ALTER DATABASE {db} SET search_path = nowhere",), ""),
}


@pytest.mark.parametrize("name", list(HOSTILE_DATABASES))
def test_a_database_that_refuses_the_session_is_one_line(sandbox: Sandbox, pg_dsn: str, name: str) -> None:
    sql, code = HOSTILE_DATABASES[name]
    db = conninfo_to_dict(pg_dsn)["dbname"]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for statement in sql:
            conn.execute(statement.replace("{db}", f'"{db}"'))
    proc = sandbox.run(*REPLAY, "--out", str(sandbox.out), "--dsn", pg_dsn, "--allow-any-dsn")
    err = proc.stderr.strip()
    assert "Traceback" not in err, err
    if not code:  # a database killpoint can still use as asked: it passes
        assert proc.returncode == 0, (proc.stdout[-2000:], err[-2000:])
        return
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], err[-2000:])
    assert len(err.splitlines()) == 1 and err.startswith(f"killpoint: error[{code}]: ") and ". Fix: " in err, err


FIRST_STATES = {"a-list": "[1, 2]", "none": "None", "a-string": "'state'", "a-set": "{1}"}


@pytest.mark.parametrize("kind", list(FIRST_STATES))
def test_initial_state_that_is_no_dict_is_named(sandbox: Sandbox, dsn_args: list[str], kind: str) -> None:
    module = f"first_state_{kind.replace('-', '_')}"
    (sandbox.cwd / f"{module}.py").write_text(textwrap.dedent(f"""
        from killpoint.reference_agent.invoice_agent import *  # noqa: F403
        def initial_state(params):
            return {FIRST_STATES[kind]}
        """))
    proc = sandbox.run(*REPLAY, "--steps", module, "--out", str(sandbox.out), *dsn_args)
    err = proc.stderr.strip()
    assert "Traceback" not in err, err
    assert proc.returncode in (1, 2), (proc.returncode, proc.stdout[-2000:], err[-2000:])
    assert "initial_state" in proc.stdout + err, (proc.stdout[-2000:], err[-2000:])
