"""``PostgresHandle``: the one interface every provider returns.

A handle names a server (``dsn``, ``kind``, ``owned``) and can make fresh databases on it. Owned servers
(local, embedded, docker) can also be crashed (power-cut-like immediate stop) and restarted on the same
data and port. ``close()`` releases everything the handle owns and is safe to call more than once.
"""

from __future__ import annotations

import hashlib
import re
from abc import ABC, abstractmethod
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from killpoint.env.postgres.capacity import DEFAULT_SERVER, fit_in
from killpoint.errors import EnvironmentProblem, UsageError

SAFE_NAME = re.compile(r"[^a-z0-9_]+")
OWNED_COMMENT = "created by killpoint"


def db_name(raw: str) -> str:
    """A valid, stable database name for ``raw`` (lower-case, ``[a-z0-9_]``, <= 63 bytes, unique by hash)."""
    clean = SAFE_NAME.sub("_", raw.lower()).strip("_") or "db"
    if clean == raw and len(clean) <= 63 and not clean[0].isdigit():
        return clean
    digest = hashlib.sha256(raw.encode()).hexdigest()[:8]
    return f"{clean[:50].rstrip('_')}_{digest}" if not clean[0].isdigit() else f"d{clean[:49]}_{digest}"


def with_database(dsn: str, name: str) -> str:
    """``dsn`` (a URL or ``key=value`` string) pointing at database ``name`` instead."""
    if "://" not in dsn:
        from psycopg.conninfo import make_conninfo  # noqa: PLC0415

        return make_conninfo(dsn, dbname=name)
    parts = urlsplit(dsn)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def _existing(conn: Any, name: str) -> tuple[str | None] | None:
    """``(comment,)`` of database ``name`` if it exists, else ``None``."""
    return conn.execute(
        "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s", (name,)
    ).fetchone()


KINDS = ("auto", "docker", "local", "embedded", "dsn")
"""The providers `--postgres` accepts."""


class PostgresHandle(ABC):
    """A Postgres server killpoint can use. See the module doc for the contract of each member."""

    kind: str
    owned: bool

    @property
    @abstractmethod
    def dsn(self) -> str:
        """libpq URL ``postgresql://user@host:port/db``; for owned servers a fresh database made at start."""

    @property
    @abstractmethod
    def admin_dsn(self) -> str:
        """A DSN for maintenance (``CREATE DATABASE``): the ``postgres`` database on owned servers."""

    def describe(self) -> str:
        """One line for humans: kind and where, and an owned server's room when it is not the default."""
        room = f", max_connections {self.connections}" if self.owned and self.connections != DEFAULT_SERVER else ""
        return f"{self.kind} Postgres at {urlsplit(self.dsn).netloc}{room}"

    def create_database(self, name: str) -> str:
        """Create a fresh, empty database (dropping one of the same name that killpoint made) and return its DSN."""
        import psycopg  # noqa: PLC0415 - keeps `import killpoint.env.postgres` light

        name = self._final_name(name)
        with psycopg.connect(self.admin_dsn, autocommit=True, connect_timeout=10) as conn:
            row = _existing(conn, name)
            if row is not None:
                if not self.owned and row[0] != OWNED_COMMENT:
                    raise UsageError(
                        "db-exists",
                        f"database {name!r} already exists on the server you named and killpoint did not create it",
                        "drop it yourself or choose another name; killpoint never drops a database it did not make",
                    )
                conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
            try:
                conn.execute(f'CREATE DATABASE "{name}"')
            except psycopg.errors.InsufficientPrivilege:
                raise EnvironmentProblem(
                    "createdb-denied",
                    f"the user in the DSN may not create databases (needed for {name!r})",
                    "grant it CREATEDB (ALTER ROLE ... CREATEDB), or let killpoint start its own Postgres",
                ) from None
            conn.execute(f"COMMENT ON DATABASE \"{name}\" IS '{OWNED_COMMENT}'")
        return with_database(self.admin_dsn, name)

    def drop_database(self, name: str) -> None:
        """Drop a database that ``create_database(name)`` made (one killpoint did not make is left alone)."""
        import psycopg  # noqa: PLC0415

        name = self._final_name(name)
        with psycopg.connect(self.admin_dsn, autocommit=True, connect_timeout=10) as conn:
            row = _existing(conn, name)
            if row is not None and row[0] == OWNED_COMMENT:
                conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')

    def _final_name(self, name: str) -> str:
        """The database name ``create_database(name)`` uses (providers may add a prefix)."""
        return db_name(name)

    connections: int = DEFAULT_SERVER
    """``max_connections`` an owned server was started with (``capacity.server_connections``)."""

    def jobs_that_fit(self, jobs: int) -> int:
        """The most runs at once, at most `jobs`, whose connections the server allows: an owned server's
        `connections` (started with room for the session's `-j`, `capacity.server_connections`); a `--dsn`
        database's limits as it reports them (`DsnServer`). At least one."""
        return max(1, fit_in(self.connections, jobs))

    def crash(self) -> None:
        """Stop the server at once, as a power cut would. Only owned servers; others raise ``UsageError``."""
        raise self._not_owned("crash")

    def restart(self) -> None:
        """Start the server again on the same data and port and wait until it accepts connections."""
        raise self._not_owned("restart")

    @abstractmethod
    def close(self) -> None:
        """Release the server and everything it left on disk (owned), or just forget it (dsn). Idempotent."""

    def _not_owned(self, what: str) -> UsageError:
        return UsageError(
            "not-owned",
            f"cannot {what} the {self.kind} server: killpoint does not own it",
            "use --postgres local, docker or embedded (or auto without --dsn) for db-crash faults",
        )

    def __enter__(self) -> PostgresHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
