"""How many connections a session needs, and whether a user's database (``--dsn``) lets it have them.

A database with ``CONNECTION LIMIT`` (or a role with one, or a server whose ``max_connections`` is nearly
used up) refuses a worker's connection with "too many connections": the worker dies, and its run would be
judged as if the agent had failed. So before anything runs the session asks the server how many more
connections it may open and refuses, in one line, when that is fewer than it needs.

1. ``needed(jobs)``: ``BASE`` (the harness's own: the connection holding the session's lock, the pooled
   connections of its hot path, the barrier's) plus ``PER_JOB`` for each run going at once (the
   incarnations of a run that may overlap: a zombie and its successor, a fleet's workers, and the checkers'
   reads).
2. ``room(conn)``: the tightest of the three limits on ``conn``'s role and database, each less the
   connections already open against it (``conn`` itself among them, so it is counted back); a superuser is
   bound by ``max_connections`` alone (Postgres exempts it from the others). ``None`` when nothing binds.
   ``server_connections(jobs)`` is what a server killpoint starts itself gets: room for ``needed(jobs)``.
3. ``check(conn, jobs)``: ``EnvironmentProblem("dsn-too-few-connections")`` naming both numbers and the
   limit found, when ``room`` is below ``needed``; ``jobs_that_fit(conn, jobs)`` is the largest number of
   runs at once, at most ``jobs``, that the room holds (0 if not even one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from killpoint.errors import EnvironmentProblem

if TYPE_CHECKING:
    import psycopg

BASE = 4
PER_JOB = 10
"""Measured: the whole suite at ``-j 1`` on a ``--dsn`` database peaked at 12 connections (crash-points alone at
5, fleet at 7; fleet at ``-j 2`` at 7), sampled from ``pg_stat_activity``."""


DEFAULT_SERVER = 100
"""``max_connections`` of an owned server for a few runs at once: Postgres's own default."""


def needed(jobs: int = 1) -> int:
    """The connections a session running ``jobs`` runs at once may hold together."""
    return BASE + PER_JOB * max(1, jobs)


def server_connections(jobs: int = 1) -> int:
    """``max_connections`` for a server killpoint starts for sessions of up to ``jobs`` runs at once:
    ``DEFAULT_SERVER``, or ``needed(jobs)`` where that is more (``-j 64`` on a 64-core machine: 644). An owned
    server of 100 refused the 101st connection of a zombie-worker exploration at ``-j 64``, and the workers
    it refused died as if the agent had failed."""
    return max(DEFAULT_SERVER, needed(jobs))


def fit_in(connections: int, jobs: int) -> int:
    """The most runs at once, at most ``jobs``, that ``connections`` (a server's room) holds (0: not one)."""
    return max(0, min(jobs, (connections - BASE) // PER_JOB))


@dataclass(frozen=True)
class Room:
    """The tightest connection limit on a session: how many more it may open, and which limit that is."""

    free: int
    limit: int
    what: str
    """The limit in words: ``database 'x_test' (CONNECTION LIMIT 3)``, ``role 'u' (CONNECTION LIMIT 5)``,
    ``the server (max_connections 20, 3 reserved)``."""


ROOM_SQL = """
SELECT current_database(), current_user, r.rolsuper, d.datconnlimit, r.rolconnlimit,
       current_setting('max_connections')::int,
       current_setting('superuser_reserved_connections')::int,
       (SELECT count(*) FROM pg_stat_activity a WHERE a.datid = d.oid AND a.backend_type = 'client backend'),
       (SELECT count(*) FROM pg_stat_activity a WHERE a.usesysid = r.oid AND a.backend_type = 'client backend'),
       (SELECT count(*) FROM pg_stat_activity a WHERE a.backend_type = 'client backend')
FROM pg_database d, pg_roles r WHERE d.datname = current_database() AND r.rolname = current_user
"""


def room(conn: psycopg.Connection) -> Room | None:
    """The tightest limit on new connections like ``conn`` (see the module doc, point 2), or ``None``."""
    row = conn.execute(ROOM_SQL).fetchone()
    if row is None:
        return None
    db, user, superuser, db_limit, role_limit, max_conn, reserved, in_db, as_role, in_all = row
    rooms = []
    if not superuser:
        if db_limit is not None and db_limit >= 0:
            rooms.append(Room(db_limit - in_db + 1, db_limit, f"database {db!r} (CONNECTION LIMIT {db_limit})"))
        if role_limit is not None and role_limit >= 0:
            rooms.append(Room(role_limit - as_role + 1, role_limit,
                              f"role {user!r} (CONNECTION LIMIT {role_limit})"))
    usable = max_conn - (0 if superuser else reserved)
    rooms.append(Room(usable - in_all + 1, usable,
                      f"the server (max_connections {max_conn}" + ("" if superuser else f", {reserved} reserved") + ")"))
    return min(rooms, key=lambda r: r.free)


def jobs_that_fit(conn: psycopg.Connection, jobs: int) -> int:
    """The most runs at once, at most ``jobs``, whose connections the room on ``conn`` holds (0: not one)."""
    found = room(conn)
    if found is None:
        return jobs
    return fit_in(found.free, jobs)


def check(conn: psycopg.Connection, jobs: int = 1) -> None:
    """Raise ``dsn-too-few-connections`` (one line) unless ``conn``'s role and database may open the
    connections a session of ``jobs`` runs at once needs."""
    found = room(conn)
    want = needed(jobs)
    if found is None or found.free >= want:
        return
    in_use = found.limit - found.free
    raise EnvironmentProblem(
        "dsn-too-few-connections",
        f"a killpoint session {'' if jobs == 1 else f'of {jobs} runs at once '}needs up to {want} connections "
        f"to the database, and {found.what} leaves it {max(found.free, 0)}"
        + (f" ({in_use} already in use)" if in_use > 0 else ""),
        f"raise the limit to at least {want + max(in_use, 0)} (ALTER DATABASE/ROLE ... CONNECTION LIMIT), "
        "or let killpoint start its own Postgres (omit --dsn)",
    )
