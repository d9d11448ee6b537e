"""A database or role with a connection limit (issue 29, item 2).

A worker refused with "too many connections" dies, and its run used to be judged as if the agent had failed
(false FAILs: "liveness", "effects never done"). Now a session that could not open the connections it needs
is refused before anything runs: one line, exit 2, with how many it needs and the limit found.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

from killpoint.env.postgres import PostgresHandle, capacity
from killpoint.env.postgres.handle import with_database
from tests.helpers.sandbox import Sandbox

REPLAY = ("replay", "--scenario", "crash-points", "--schedule", "email:effect.applied:kill")


@pytest.fixture
def limited(pg_server: PostgresHandle, request: pytest.FixtureRequest) -> Iterator[tuple[str, psycopg.Connection]]:
    """A database of the user's and a plain role (no superuser: Postgres exempts those from the limits) that
    may create a schema there; yields the role's DSN and an admin connection to set the limits with."""
    name = f"lim_{request.node.name}_test"[:50].lower().replace("[", "_").replace("]", "").replace("-", "_")
    role = f"lim_{abs(hash(name)) % 10**8}"
    db = pg_server.create_database(name).rsplit("/", 1)[1]
    with psycopg.connect(pg_server.admin_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        admin.execute(sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(sql.Identifier(db), sql.Identifier(role)))
        parts = urlsplit(pg_server.admin_dsn)
        user_dsn = with_database(urlunsplit(parts._replace(netloc=f"{role}@{parts.netloc.rsplit('@', 1)[-1]}")), db)
        try:
            yield user_dsn, admin
        finally:
            pg_server.drop_database(name)
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def _describe(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"


def _db_and_role(dsn: str) -> tuple[str, str]:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT current_database(), current_user").fetchone()
    assert row is not None
    return row[0], row[1]


@pytest.mark.parametrize("on", ["database", "role"])
def test_a_connection_limit_below_a_sessions_need_is_one_line_and_exit_2(
        sandbox: Sandbox, limited: tuple[str, psycopg.Connection], on: str) -> None:
    dsn, admin = limited
    db, role = _db_and_role(dsn)
    target = sql.SQL("DATABASE {}" if on == "database" else "ROLE {}").format(sql.Identifier(db if on == "database"
                                                                                            else role))
    admin.execute(sql.SQL("ALTER {} CONNECTION LIMIT 3").format(target))
    proc = sandbox.run("run", "--scenario", "crash-points", "--seed", "7", "--dsn", dsn, "--out", str(sandbox.out))
    assert proc.returncode == 2, _describe(proc)
    line = proc.stderr.strip()
    assert line.startswith("killpoint: error[dsn-too-few-connections]: ") and len(line.splitlines()) == 1, line
    assert f"needs up to {capacity.needed(1)} connections" in line and "CONNECTION LIMIT 3" in line, line
    assert ("database" if on == "database" else "role") in line
    with psycopg.connect(dsn) as conn:  # nothing of the session's left behind
        assert conn.execute(r"SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'killpoint\_s\_%'").fetchone() == (0,)
    assert sandbox.survivors() == [] and sandbox.leftover_dirs() == []


def test_connections_in_use_by_others_count_against_the_limit(limited: tuple[str, psycopg.Connection]) -> None:
    """A limit that would do, were it not for connections the user already holds: the line says so."""
    dsn, admin = limited
    db, _ = _db_and_role(dsn)
    admin.execute(sql.SQL("ALTER DATABASE {} CONNECTION LIMIT {}").format(sql.Identifier(db),
                                                                         sql.Literal(capacity.needed(1) + 1)))
    held = [psycopg.connect(dsn) for _ in range(3)]
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            with pytest.raises(Exception) as err:
                capacity.check(conn)
        assert "3 already in use" in str(err.value), err.value
    finally:
        for conn in held:
            conn.close()


def test_a_limit_that_leaves_enough_is_no_obstacle(sandbox: Sandbox, limited: tuple[str, psycopg.Connection]) -> None:
    dsn, admin = limited
    db, _ = _db_and_role(dsn)
    admin.execute(sql.SQL("ALTER DATABASE {} CONNECTION LIMIT {}").format(sql.Identifier(db),
                                                                         sql.Literal(capacity.needed(1))))
    proc = sandbox.run(*REPLAY, "--dsn", dsn, "--out", str(sandbox.out))
    assert proc.returncode == 0, _describe(proc)
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert capacity.jobs_that_fit(conn, 8) == 1
