"""Whether the database, not the agent, ended a worker: it refused the worker a connection for want of slots.

Postgres refuses a connection past `max_connections` ("sorry, too many clients already"), into the slots it
keeps for superusers ("remaining connection slots are reserved ..."), or past a role's or a database's
`CONNECTION LIMIT` ("too many connections for role ..." / "... for database ..."): SQLSTATE 53300,
too_many_connections, whichever driver reports it (psycopg, SQLAlchemy's wrapper of it, asyncpg's
`TooManyConnectionsError`). A worker refused so dies whatever the agent does, so a run in which one died of it
is no evidence of a bug: its failing verdicts say UNKNOWN with `refused`'s line, never FAIL (a check that
passed still stands). The server's other endings are not this: a db-crash's "connection refused" or
"terminating connection due to administrator command" is a fault killpoint injected, judged as one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from killpoint.checkers.evidence import Evidence

REFUSALS = (
    "too many clients already",
    "remaining connection slots are reserved",
    "too many connections for role",
    "too many connections for database",
)
"""Postgres's messages for SQLSTATE 53300 (src/backend/utils/init/postinit.c, storage/ipc/procarray.c)."""


def refusal(lines: list[str]) -> str | None:
    """The first of `lines` that says the database refused a connection for want of slots, or None."""
    return next((line.strip() for line in lines if any(r in line for r in REFUSALS)), None)


def refused(ev: Evidence) -> str:
    """Why `ev`'s run cannot be judged because the database refused one of its workers a connection for want
    of slots (the first such worker, with the message: in its traceback, or in what a worker that exited
    without one last wrote, `Evidence.refused`), or '' when none died of that."""
    found = {inc: refusal(crash.get("tail") or []) for inc, crash in ev.crashes.items()}
    found.update(ev.refused)
    for inc, said in sorted(found.items()):
        if said:
            return (f"the database refused {inc} a connection ({said[-160:]}): a worker refused for want of "
                    "connection slots dies whatever the agent does (run with fewer -j, or give the server more "
                    "max_connections or the role or database a higher CONNECTION LIMIT; if it happens at -j 1, "
                    "the agent may hold more connections than it closes)")
    return ""
