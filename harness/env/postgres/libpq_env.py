"""libpq's environment variables, kept away from the servers killpoint starts itself.

libpq reads ``PGSSLMODE``, ``PGOPTIONS``, ``PGTARGETSESSIONATTRS``, ``PGSERVICE``... for every parameter a
DSN leaves out. They are the user's settings for the user's servers: on a server killpoint starts (no SSL,
trust authentication, settings of its own) ``PGSSLMODE=require`` or a ``PGSERVICE`` naming a service of
another machine would break every connection, and ``PGOPTIONS`` (``default_transaction_read_only``,
``statement_timeout``) would change what the agent under test sees. On a database the user names
(``--dsn``) they apply, as they would to any libpq program.

1. ``LIBPQ_VARS``: every variable libpq reads (the PostgreSQL 18 list, "Environment Variables").
2. ``ignored()``: for the block, those variables are out of ``os.environ`` (so out of the harness's own
   connections, of the server processes it starts and of every process they start), put back when the
   outermost block ends. ``provide`` wraps an owned server in it.
3. ``without(env)``: a copy of ``env`` without them, for a process started with an environment of its own
   (a worker incarnation of a session on an owned server).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

LIBPQ_VARS = frozenset({
    "PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGPASSWORD", "PGPASSFILE", "PGREQUIREAUTH",
    "PGCHANNELBINDING", "PGSERVICE", "PGSERVICEFILE", "PGSYSCONFDIR", "PGOPTIONS", "PGAPPNAME", "PGSSLMODE",
    "PGREQUIRESSL", "PGSSLNEGOTIATION", "PGSSLCOMPRESSION", "PGSSLCERT", "PGSSLKEY", "PGSSLCERTMODE",
    "PGSSLROOTCERT", "PGSSLCRL", "PGSSLCRLDIR", "PGSSLSNI", "PGREQUIREPEER", "PGSSLMINPROTOCOLVERSION",
    "PGSSLMAXPROTOCOLVERSION", "PGMINPROTOCOLVERSION", "PGMAXPROTOCOLVERSION", "PGGSSENCMODE", "PGKRBSRVNAME",
    "PGGSSLIB", "PGGSSDELEGATION", "PGCONNECT_TIMEOUT", "PGCLIENTENCODING", "PGTARGETSESSIONATTRS",
    "PGLOADBALANCEHOSTS", "PGDATESTYLE", "PGTZ", "PGGEQO", "PGLOCALEDIR", "PGOAUTHDEBUG",
})

_lock = threading.Lock()
_depth = 0
_saved: dict[str, str] = {}


@contextmanager
def ignored() -> Iterator[None]:
    """``LIBPQ_VARS`` out of ``os.environ`` for the block; the outermost of nested blocks puts them back
    (a variable set again meanwhile is left as it was set)."""
    global _depth
    with _lock:
        if _depth == 0:
            _saved.update({name: os.environ.pop(name) for name in LIBPQ_VARS if name in os.environ})
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                for name, value in _saved.items():
                    os.environ.setdefault(name, value)
                _saved.clear()


def without(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without ``LIBPQ_VARS``."""
    return {name: value for name, value in env.items() if name not in LIBPQ_VARS}
