"""`Environment.pooled`: the harness's hot-path connection is kept between uses, and never handed out broken."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import psycopg
import pytest

from killpoint.env.environment import Environment


@pytest.fixture
def env(pg_dsn: str, tmp_path: Path):
    environment = Environment(run_dir=tmp_path)
    environment.pg = SimpleNamespace(dsn=pg_dsn)  # only the DSN is used by `connect`/`pooled`
    yield environment
    environment._close_pool()


def backend(env: Environment) -> int:
    with env.pooled() as conn:
        return conn.execute("SELECT pg_backend_pid()").fetchone()[0]


def test_a_connection_is_kept_between_uses(env: Environment) -> None:
    assert backend(env) == backend(env)


def test_one_left_in_a_transaction_is_not_kept(env: Environment) -> None:
    with env.pooled() as conn:
        first = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        conn.execute("BEGIN")
    assert backend(env) != first


def test_one_that_failed_is_not_kept(env: Environment) -> None:
    first = backend(env)
    with pytest.raises(psycopg.errors.UndefinedTable), env.pooled() as conn:
        conn.execute("SELECT * FROM no_such_table")
    assert backend(env) != first


def test_one_the_server_closed_is_replaced_not_handed_out(env: Environment) -> None:
    """As after a `db-crash` restart: the server ended the idle connection; the next use gets a new one."""
    first = backend(env)
    with env.connect() as other:
        assert other.execute("SELECT pg_terminate_backend(%s)", (first,)).fetchone()[0]
        for _ in range(100_000):  # gone once the server has reaped it (its FATAL message is on the socket)
            if not other.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (first,)).fetchone():
                break
    second = backend(env)
    assert second != first


def test_closing_the_pool_closes_its_connections(env: Environment) -> None:
    with env.pooled() as conn:
        pass
    env._close_pool()
    assert conn.closed
