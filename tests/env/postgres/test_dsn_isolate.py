"""A `--dsn` session whose framework makes schemas by name (DBOS's `dbos`) runs in a database of its own,
dropped at the end; without CREATEDB it stays in its schema and says what was left and how to remove it
(harness/env/postgres/dsn.py `isolate`, harness/env/postgres/session_schema.py)."""

from __future__ import annotations

import secrets
import socket
import subprocess
import sys
from collections.abc import Iterator

import psutil
import psycopg
import pytest
from psycopg import sql

from killpoint.env.postgres import PostgresHandle, session_schema
from killpoint.env.postgres.dsn import DsnServer, database_name
from killpoint.env.postgres.reaper import session_id


def _schemas(dsn: str) -> set[str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return {r[0] for r in conn.execute("SELECT nspname FROM pg_namespace").fetchall()}


def _databases(dsn: str) -> set[str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return {r[0] for r in conn.execute("SELECT datname FROM pg_database").fetchall()}


@pytest.fixture
def user_db(pg_server: PostgresHandle) -> Iterator[str]:
    dsn = pg_server.create_database("isolate_user_test")
    yield dsn
    pg_server.drop_database("isolate_user_test")


def test_isolated_session_runs_in_its_own_database_and_drops_it(user_db: str) -> None:
    srv = DsnServer.open(user_db, allow_any_dsn=True)
    try:
        assert srv.isolate(("dbos",)) is True
        own = database_name(srv.dsn)
        assert own == srv.database and session_schema.DB_NAME_RE.match(own), srv.dsn
        with psycopg.connect(srv.dsn, autocommit=True) as conn:
            conn.execute("CREATE SCHEMA dbos")  # as DBOS does, by name
        assert not any(s.startswith("killpoint_s_") for s in _schemas(user_db))  # the session schema went too
    finally:
        srv.close()
    assert own not in _databases(user_db)
    assert "dbos" not in _schemas(user_db)


def test_without_createdb_the_session_stays_in_its_schema_and_names_what_is_left(
        pg_server: PostgresHandle, user_db: str) -> None:
    role = f"kp_nocreatedb_{secrets.token_hex(4)}"
    with psycopg.connect(user_db, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN NOCREATEDB").format(sql.Identifier(role)))
        conn.execute(sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(
            sql.Identifier(database_name(user_db)), sql.Identifier(role)))
    limited = user_db.replace("postgres@", f"{role}@", 1)
    said: list[str] = []
    try:
        srv = DsnServer.open(limited, allow_any_dsn=True)
        try:
            assert srv.isolate(("dbos",), said.append) is False
            assert srv.database is None and srv.schema is not None
            with psycopg.connect(srv.dsn, autocommit=True) as conn:
                conn.execute("CREATE SCHEMA dbos")  # DBOS's, in the user's database
        finally:
            srv.close()
        assert len(said) == 1 and 'DROP SCHEMA "dbos" CASCADE' in said[0] and "isolate_user_test" in said[0], said
    finally:
        with psycopg.connect(user_db, autocommit=True) as conn:
            conn.execute("DROP SCHEMA IF EXISTS dbos CASCADE")
            conn.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM {}").format(
                sql.Identifier(database_name(user_db)), sql.Identifier(role)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def _dead_session() -> str:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    sid = session_id(psutil.Process(proc.pid))
    proc.wait()
    return sid


def test_reaper_drops_the_databases_of_dead_sessions_only(user_db: str) -> None:
    dead = f"killpoint session {_dead_session()} on {socket.gethostname()}"
    locked, unlocked = (session_schema.DB_PREFIX + secrets.token_hex(6) for _ in range(2))
    live = session_schema.owner_comment(locked)
    names = {session_schema.DB_PREFIX + secrets.token_hex(6): dead, locked: live,
             unlocked: session_schema.owner_comment(unlocked)}
    with psycopg.connect(user_db, autocommit=True) as conn, psycopg.connect(user_db, autocommit=True) as owner:
        assert session_schema.lock(owner, locked)  # a live session holds its lock (here, on another connection)
        for name, comment in names.items():
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            conn.execute(sql.SQL("COMMENT ON DATABASE {} IS {}").format(sql.Identifier(name), sql.Literal(comment)))
        try:
            reaped = session_schema.reap_databases(conn)
            left = _databases(user_db)
        finally:
            for name in names:
                session_schema.drop_database(conn, name)
    assert sorted(n for n, c in names.items() if c != live) == sorted(reaped)
    assert all((n in left) == (c == live) for n, c in names.items()), left
