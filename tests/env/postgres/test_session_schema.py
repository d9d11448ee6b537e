"""The per-session schema on a user's database: the DSN that reaches it, and which schemas a reaper may drop."""

from __future__ import annotations

import socket
import subprocess
import sys

import psutil
import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from killpoint.env.postgres import session_schema
from killpoint.env.postgres.dsn import DsnServer
from killpoint.env.postgres.reaper import session_id


@pytest.mark.parametrize(("dsn", "want"), [
    ("postgresql://u@h:5/x_test", "-c search_path=killpoint_s_0123456789ab"),
    ("postgresql://u@h:5/x_test?sslmode=disable&options=-cwork_mem%3D4MB",
     "-c work_mem=4MB -c search_path=killpoint_s_0123456789ab"),
    ("host=h dbname=x_test", "-c search_path=killpoint_s_0123456789ab"),
    ("host=h dbname=x_test options=-cwork_mem=4MB", "-c work_mem=4MB -c search_path=killpoint_s_0123456789ab"),
    ("postgresql://u@h:5/x_test?options=-c%20search_path%3Dpublic",  # the user's path is replaced: nothing
     "-c search_path=killpoint_s_0123456789ab"),                       # falls through to their tables
])
def test_scoped_dsn_sets_the_search_path_and_keeps_other_options(dsn: str, want: str) -> None:
    scoped = session_schema.scoped(dsn, "killpoint_s_0123456789ab")
    assert conninfo_to_dict(scoped)["options"] == want, scoped  # as libpq reads it (%20, never `+`)
    assert ("sslmode=disable" in scoped) == ("sslmode=disable" in dsn)


def _dead_session() -> str:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    sid = session_id(psutil.Process(proc.pid))
    proc.wait()
    return sid


@pytest.mark.parametrize(("name", "comment", "reaped"), [
    ("killpoint_s_0123456789ab", "UNLOCKED", True),  # nobody holds the lock its comment names
    ("killpoint_s_0123456789ab", "LOCKED", False),  # its owner holds it, wherever that owner runs
    ("killpoint_s_0123456789ab", "LOCKED-DEAD-PID", False),  # a pid invisible here proves nothing
    ("killpoint_s_0123456789ab", "OTHER-LOCK", False),  # a lock that is not this name's: not ours
    ("killpoint_s_0123456789ab", "DEAD", True),  # an older killpoint's comment: the pid rule
    ("killpoint_s_0123456789ab", "LIVE", False),
    ("killpoint_s_0123456789ab", "ELSEWHERE", False),  # a dead pid of another host proves nothing
    ("killpoint_s_0123456789ab", "the user's own", False),
    ("killpoint_s_0123456789ab", None, False),
    ("killpoint_s_notours", "DEAD", False),  # not a name killpoint makes
])
def test_only_a_dead_sessions_schema_is_reaped(name: str, comment: str | None, reaped: bool) -> None:
    host = socket.gethostname()
    key = session_schema.lock_key(name)
    text = {"UNLOCKED": session_schema.owner_comment(name), "LOCKED": session_schema.owner_comment(name),
            "LOCKED-DEAD-PID": f"killpoint session {_dead_session()} on {host}; lock {key}",
            "OTHER-LOCK": f"killpoint session {_dead_session()} on {host}; lock {key + 1}",
            "DEAD": f"killpoint session {_dead_session()} on {host}",
            "LIVE": f"killpoint session {session_id()} on {host}",
            "ELSEWHERE": f"killpoint session {_dead_session()} on not-{host}"}.get(comment or "", comment)
    held = {key} if comment in ("LOCKED", "LOCKED-DEAD-PID") else set()
    assert session_schema.is_dead_session(name, text, held=held.__contains__) is reaped


def test_a_dsn_server_drops_its_schema_and_nothing_else(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE checkpoints (id int); INSERT INTO checkpoints VALUES (7)")
    server = DsnServer.open(pg_dsn, allow_any_dsn=True)
    schema = server.schema
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE checkpoints (run_id text)")  # the session's own, beside the user's
        assert conn.execute("SELECT current_schema()").fetchone() == (schema,)
    server.close()
    server.close()  # idempotent
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() == (0,)
        assert conn.execute("SELECT * FROM public.checkpoints").fetchall() == [(7,)]
