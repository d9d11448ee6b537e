"""A framework's tables exist only once its worker created them: a worker that died before (a script that
fails at import, a missing setting) leaves a run with no records, which every read of a framework adapter
answers as "nothing recorded" (`base.fetch_one`), never as a harness error (before: a traceback of
`UndefinedTable` from the crash-free run's status read). Real Postgres, an empty database."""

from __future__ import annotations

import psycopg
import pytest

from killpoint.adapters import get


@pytest.mark.parametrize("name", ["langgraph", "dbos"])
def test_every_read_of_a_run_before_the_frameworks_tables_exist_says_nothing_is_recorded(pg_dsn: str,
                                                                                         name: str) -> None:
    adapter = get(name)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert adapter.status(conn, "run-1") is None
        assert adapter.statuses(conn, ["run-1", "run-2"]) == {"run-1": None, "run-2": None}
        assert adapter.cursor(conn, "run-1") is None
        assert adapter.progress(conn, "run-1") == (None, None)
        assert adapter.final(conn, "run-1") == (None, None)
        assert adapter.notes(conn, "run-1") == []
        assert adapter.retire(conn, "run-1") == 0
        assert adapter.recorded(conn, ["run-1"]) == []
        assert conn.execute("SELECT 1").fetchone() == (1,)  # the connection is still usable


def test_an_error_other_than_a_missing_table_is_still_raised(pg_dsn: str) -> None:
    """Only a table that does not exist yet means "nothing recorded": a table of another shape is the
    framework's (or the adapter's) problem and says so."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA dbos")
        conn.execute("CREATE TABLE dbos.workflow_status (workflow_uuid text)")
        with pytest.raises(psycopg.errors.UndefinedColumn):
            get("dbos").status(conn, "run-1")
