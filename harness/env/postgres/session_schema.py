"""A schema of its own for every session on a database the user names (``--dsn``).

On a user's database killpoint must touch only what it created. So every object killpoint and the
reference runtime create there (checkpoints, leases, jobs, the audit trail and its trigger, the barrier...)
lives in a schema made for one session, ``killpoint_s_<hex>``, which every process reaches through the
``search_path`` set in the DSN it is given (libpq ``options=-csearch_path=<schema>``). Unqualified names
then resolve in that schema only: the user's own ``checkpoints`` or ``jobs`` in ``public`` are never seen,
let alone swept, claimed or deleted, and two sessions on one database never meet.

1. ``create(conn)`` takes the session's advisory lock on the server (``lock_key(name)``, on ``conn``, a
   connection the session keeps open to its end), then makes the schema and comments it with its owner:
   ``killpoint session <pid>-<ctime> on <host>; lock <key>``. The lock, not the pid, is what proves the
   session alive: every session on the server sees it, whatever host or PID namespace it runs in, and the
   server releases it when the owner's connection ends (a SIGKILL closes it).
2. ``scoped(dsn, schema)`` is the DSN every process of the session uses (URL or ``key=value``; options
   already in the DSN are kept). Its ``search_path`` is the session schema alone, the user's own replaced:
   should the schema ever be gone, an unqualified name is an error, never the user's table of that name.
3. ``drop(conn, schema)`` removes the schema and everything in it (CASCADE) at the session's end, normally
   or on Ctrl-C/SIGTERM (the provider's ``close``), before the lock is let go.
4. ``reap(conn)`` drops the schemas of sessions that died without step 3 (a SIGKILL): only a schema whose
   name is ours *and* whose comment names its lock, which nobody holds on the server (a comment of an older
   killpoint, without a lock: a process of this host that is no longer alive). A schema with any other
   comment, or of a live session, is never touched.
5. A session whose framework creates schemas by name, outside any search path (DBOS's ``dbos``), gets a
   database of its own instead (``create_database``, ``test_killpoint_s_<hex>``, locked and commented as in
   step 1, dropped WITH (FORCE) at the end; ``reap_databases`` drops those of dead sessions by the same rule).
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import secrets
import socket
from collections.abc import Callable

import psycopg
from psycopg import sql

from killpoint.env.postgres import conninfo
from killpoint.env.postgres.reaper import session_alive, session_id

PREFIX = "killpoint_s_"
NAME_RE = re.compile(r"^killpoint_s_[0-9a-f]{12}$")
DB_PREFIX = "test_" + PREFIX
DB_NAME_RE = re.compile(r"^test_killpoint_s_[0-9a-f]{12}$")
COMMENT_RE = re.compile(r"^killpoint session (?P<pid>\d+)-(?P<ctime>\d+) on (?P<host>[^\s;]+)(?:; lock (?P<key>-?\d+))?$")
DROP_LOCK_TIMEOUT = "10s"


def new_name() -> str:
    """A fresh schema name: ``killpoint_s_`` and 12 random hex digits."""
    return f"{PREFIX}{secrets.token_hex(6)}"


def lock_key(name: str) -> int:
    """The advisory lock (a signed 64-bit key) whose holder owns the session schema or database ``name``."""
    return int.from_bytes(hashlib.sha256(f"killpoint:{name}".encode()).digest()[:8], "big", signed=True)


def owner_comment(name: str) -> str:
    """The comment naming the owner of ``name``: its session id, this host and the lock it holds."""
    return f"killpoint session {session_id()} on {socket.gethostname()}; lock {lock_key(name)}"


def lock(conn: psycopg.Connection, name: str) -> bool:
    """Take ``name``'s advisory lock on ``conn`` (held until ``conn`` closes); False if someone holds it."""
    row = conn.execute("SELECT pg_try_advisory_lock(%s)", (lock_key(name),)).fetchone()
    return bool(row and row[0])


def lock_held(conn: psycopg.Connection, key: int) -> bool:
    """True if any session on the server (in any database) holds advisory lock ``key``."""
    row = conn.execute("SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted "
                       "AND objsubid = 1 AND classid::bigint = %s AND objid::bigint = %s)",
                       ((key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF)).fetchone()
    return bool(row and row[0])


def _fresh(conn: psycopg.Connection, make: Callable[[], str]) -> str:
    """A new name from ``make`` whose lock ``conn`` now holds (a held one is someone's: another name)."""
    while True:
        name = make()
        if lock(conn, name):
            return name


def create(conn: psycopg.Connection) -> str:
    """Create a fresh session schema owned by this process and return its name. ``conn`` (autocommit) holds
    the schema's lock from before the schema exists: keep it open for as long as the session lives."""
    name = _fresh(conn, new_name)
    conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    conn.execute(sql.SQL("COMMENT ON SCHEMA {} IS {}").format(sql.Identifier(name), sql.Literal(owner_comment(name))))
    return name


def scoped(dsn: str, schema: str) -> str:
    """``dsn`` with ``search_path`` set to ``schema`` alone: any other ``options`` it carried are kept, a
    ``search_path`` of the user's is replaced (``conninfo.merge``)."""
    return conninfo.with_settings(dsn, {"search_path": schema})


def drop(conn: psycopg.Connection, schema: str) -> None:
    """Drop ``schema`` and everything in it, if it is still there (waits at most ``DROP_LOCK_TIMEOUT`` for
    locks; a schema left by a timeout is reaped by a later run once this process is gone)."""
    with contextlib.suppress(psycopg.Error):
        conn.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(DROP_LOCK_TIMEOUT)))
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def is_dead_session(name: str, comment: str | None, pattern: re.Pattern[str] = NAME_RE,
                    held: Callable[[int], bool] | None = None) -> bool:
    """True if ``name``/``comment`` prove a schema (a database, with ``DB_NAME_RE``) killpoint made for a
    session that has died: the lock its comment names is ``held`` by nobody (a comment without a lock, of an
    older killpoint: a process of this host that is no longer alive)."""
    if not pattern.match(name) or comment is None:
        return False
    m = COMMENT_RE.match(comment)
    if m is None:
        return False
    if m.group("key") is not None:
        return held is not None and int(m.group("key")) == lock_key(name) and not held(int(m.group("key")))
    if m.group("host") != socket.gethostname():
        return False
    return not session_alive(int(m.group("pid")), int(m.group("ctime")))


def reap(conn: psycopg.Connection) -> list[str]:
    """Drop the schemas of dead sessions (see ``is_dead_session``); return their names."""
    return _reap(conn, "SELECT nspname, obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname LIKE %s",
                 PREFIX, NAME_RE, drop)


def _reap(conn: psycopg.Connection, query: str, prefix: str, pattern: re.Pattern[str],
          dropper: Callable[[psycopg.Connection, str], None]) -> list[str]:
    """Drop with `dropper` each object `query` lists (name, comment) under `prefix` whose session is dead."""
    rows = conn.execute(query, (prefix.replace("_", r"\_") + "%",)).fetchall()
    reaped = []
    for name, comment in rows:
        if is_dead_session(name, comment, pattern, lambda key: lock_held(conn, key)):
            dropper(conn, name)
            reaped.append(name)
    return reaped


def create_database(conn: psycopg.Connection, keeper: psycopg.Connection) -> str:
    """Create a fresh session database on ``conn``'s server, owned as ``create`` owns a schema (``keeper``
    holds its lock, from before it exists, for as long as the session lives); its name."""
    name = _fresh(keeper, lambda: DB_PREFIX + secrets.token_hex(6))
    try:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    except BaseException:
        with contextlib.suppress(psycopg.Error):
            keeper.execute("SELECT pg_advisory_unlock(%s)", (lock_key(name),))
        raise
    conn.execute(sql.SQL("COMMENT ON DATABASE {} IS {}").format(sql.Identifier(name),
                                                                 sql.Literal(owner_comment(name))))
    return name


def drop_database(conn: psycopg.Connection, name: str) -> None:
    """Drop the session database ``name`` (its sessions are ended), if it is still there."""
    with contextlib.suppress(psycopg.Error):
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def reap_databases(conn: psycopg.Connection) -> list[str]:
    """Drop the session databases of dead sessions (see ``is_dead_session``); return their names."""
    return _reap(conn, "SELECT datname, shobj_description(oid, 'pg_database') FROM pg_database WHERE datname LIKE %s",
                 DB_PREFIX, DB_NAME_RE, drop_database)
