"""``dsn``: a database the user names. killpoint never drops it, never crashes the server, and refuses a
database whose name has no word ``test`` (``is_test_name``) unless told ``--allow-any-dsn``.

1. Before connecting, the name libpq would resolve (the DSN's ``dbname``, else ``PGDATABASE``, else the
   user) is checked, so an obviously wrong DSN is refused without a connection.
2. After connecting, the name is checked again on ``current_database()`` of the database actually reached
   (a service file or libpq's environment may have chosen another).
3. Schemas of dead sessions are reaped; a database (or role) whose connection limit leaves a session fewer
   connections than it needs is refused in one line (``capacity``). This session gets a schema of its own
   (``session_schema``): ``dsn`` reaches only that schema, so nothing of the user's is seen or changed.
   The connection that made it stays open to the session's end, holding the schema's advisory lock: the
   proof, to any other session, that this one is alive. ``close()`` drops that schema (CASCADE), then
   closes that connection; the user's database itself is never dropped.
4. ``isolate(schemas)``: for a framework that creates schemas by name whatever the search path (DBOS's
   ``dbos``), the session moves to a database of its own on the same server (``test_killpoint_s_<hex>``),
   which ``close()`` drops. If the user may not create databases, the session stays in its schema and
   ``close()`` says, in one line, which of ``schemas`` the session's workers left in the user's database
   and how to remove them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from killpoint.env.postgres import capacity, conninfo, session_schema
from killpoint.env.postgres.handle import PostgresHandle, with_database
from killpoint.errors import EnvironmentProblem, UsageError

if TYPE_CHECKING:
    import psycopg


def database_name(dsn: str) -> str:
    """The database a DSN names (URL or ``key=value`` form), as libpq would resolve it."""
    from psycopg.conninfo import conninfo_to_dict  # noqa: PLC0415

    try:
        params = conninfo_to_dict(dsn)
    except Exception as exc:  # noqa: BLE001 - psycopg raises ProgrammingError for junk
        raise UsageError(
            "dsn-invalid",
            f"cannot parse the DSN ({' '.join(str(exc).split())})",
            "pass a libpq URL like postgresql://user@host:5432/my_test",
        ) from None
    return str(params.get("dbname") or os.environ.get("PGDATABASE") or params.get("user")
               or os.environ.get("PGUSER") or "")


WORD_RE = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
TEST_RULE = ("'test' or 'tests' as a word of its own: test, tests, test_app, app_test, app-test, app.test, "
             "appTest, test2")


def is_test_name(name: str) -> bool:
    """True if ``name`` has the word ``test`` or ``tests``: its words are split at every character that is
    not a letter or digit, at a lower-to-upper case change and between letters and digits (``app_test``,
    ``test-2``, ``AppTest``, ``test2`` have it; ``prod_latest``, ``attestation``, ``contest``, ``testdb`` do
    not: a substring is no word)."""
    return any(word.lower() in ("test", "tests") for word in WORD_RE.findall(name))


def check_safe(dsn: str, allow_any_dsn: bool, reached: str | None = None) -> None:
    """Raise ``UsageError`` unless the database name has the word ``test`` (``is_test_name``) or
    ``allow_any_dsn`` is set. The name is ``reached`` (``current_database()`` of a connection) when given,
    else the one the DSN resolves to."""
    name = database_name(dsn) if reached is None else reached
    if is_test_name(name) or allow_any_dsn:
        return
    via = "" if reached is None else " (the database the DSN actually reached)"
    raise UsageError(
        "dsn-not-test",
        f"refusing database {name!r}{via}: its name does not have the word 'test' ({TEST_RULE}), and killpoint "
        "creates tables and databases on the server it is given, so it could damage real data",
        "point --dsn at a database named like app_test or test_app, or pass --allow-any-dsn if you are sure",
    )


def with_env_options(dsn: str) -> str:
    """``dsn`` carrying ``PGOPTIONS`` in its ``options`` when it has none of its own: libpq reads that variable
    only for a DSN without ``options``, and every session DSN gets some (its ``search_path``), so the user's
    ``PGOPTIONS`` would otherwise reach the first connection and none after it."""
    env = os.environ.get("PGOPTIONS")
    if not env or conninfo.get(dsn, "options") is not None:
        return dsn
    return conninfo.with_options(dsn, env)


def keeper_connection(dsn: str) -> psycopg.Connection:
    """An autocommit connection to ``dsn`` fit to hold a session's locks for hours: no idle timeout of the
    user's ends it while the session lives (which would let another session take this one for dead)."""
    import psycopg  # noqa: PLC0415

    conn = psycopg.connect(dsn, connect_timeout=5, autocommit=True, keepalives=1, keepalives_idle=30)
    for setting in ("idle_session_timeout", "idle_in_transaction_session_timeout", "statement_timeout"):
        try:
            conn.execute(f"SET {setting} = 0")
        except psycopg.errors.UndefinedObject:
            pass  # an older server without it: nothing to turn off
    return conn


def _refused(dsn: str, exc: Exception) -> EnvironmentProblem:
    """The one-line error for a DSN whose server refused or dropped the connection."""
    why = str(exc).strip().splitlines()[0].rstrip(".?")[:200] if str(exc).strip() else type(exc).__name__
    where = urlsplit(dsn).hostname if "://" in dsn else "the server"
    return EnvironmentProblem(
        "dsn-refused",
        f"cannot connect to the DSN you gave ({where}): {why}",
        "start that server or fix host, port, user and password in --dsn; or omit --dsn to let "
        "killpoint start its own Postgres",
    )


def _unusable(exc: Exception) -> EnvironmentProblem:
    """The one-line error for a database that answers but refuses what a session must do there."""
    from psycopg.errors import ReadOnlySqlTransaction  # noqa: PLC0415

    why = " ".join(str(exc).split())[:200].rstrip(".") or type(exc).__name__
    if isinstance(exc, ReadOnlySqlTransaction):
        return EnvironmentProblem(
            "dsn-read-only", f"the database you gave is read-only for this session ({why}): killpoint must "
            "create a schema of its own there", "point --dsn at a writable database (check "
            "default_transaction_read_only in the DSN's options, PGOPTIONS, the database and the role)")
    return EnvironmentProblem(
        "dsn-unusable", f"the database you gave refused what a killpoint session must do there ({why})",
        "check the settings your DSN's options, PGOPTIONS, the database and the role give a session "
        "(statement_timeout, default_transaction_read_only...), or omit --dsn")


class DsnServer(PostgresHandle):
    """A server named by the user. Not owned: ``crash``/``restart`` raise; ``close`` drops only what we made
    (the session's schema)."""

    kind = "dsn"
    owned = False

    def __init__(self, dsn: str, schema: str | None = None, keeper: psycopg.Connection | None = None) -> None:
        self._raw = dsn
        self.schema = schema
        self._keeper = keeper
        """The connection holding the session's advisory locks (``session_schema``), open until ``close``."""
        self.database: str | None = None
        """The session's own database, once ``isolate`` made one."""
        self._dsn = dsn if schema is None else session_schema.scoped(with_env_options(dsn), schema)
        self._watched: list[str] = []  # schemas a framework may leave in the user's database (not isolated)
        self._say: Callable[[str], None] | None = None

    @classmethod
    def open(cls, dsn: str, allow_any_dsn: bool = False) -> DsnServer:
        """Check the name is safe and the server answers; raise a one-line error otherwise."""
        check_safe(dsn, allow_any_dsn)
        import psycopg  # noqa: PLC0415

        try:
            conn = keeper_connection(dsn)
        except psycopg.OperationalError as exc:
            raise _refused(dsn, exc) from None
        try:
            reached = conn.execute("SELECT current_database()").fetchone()
            check_safe(dsn, allow_any_dsn, reached=str(reached[0]) if reached else "")
            session_schema.reap(conn)
            session_schema.reap_databases(conn)
            capacity.check(conn)  # a session that could not open its workers' connections judges nothing
            try:
                schema = session_schema.create(conn)
            except psycopg.errors.InsufficientPrivilege:
                raise EnvironmentProblem(
                    "dsn-no-schema",
                    "the user in the DSN may not create a schema in that database (killpoint keeps "
                    "everything it makes in a schema of its own, never among your tables)",
                    "grant it CREATE on the database (GRANT CREATE ON DATABASE ... TO ...), or let "
                    "killpoint start its own Postgres",
                ) from None
        except BaseException as exc:
            conn.close()
            if isinstance(exc, psycopg.OperationalError):
                raise _refused(dsn, exc) from None
            if isinstance(exc, psycopg.Error):
                raise _unusable(exc) from None
            raise
        return cls(dsn, schema, conn)

    @property
    def dsn(self) -> str:
        return self._dsn

    @property
    def admin_dsn(self) -> str:
        return self._raw

    def _final_name(self, name: str) -> str:
        """Databases made next to the user's always carry ``test`` in their name."""
        final = super()._final_name(name)
        return final if is_test_name(final) else super()._final_name(f"test_{name}")

    def isolate(self, schemas: tuple[str, ...], say: Callable[[str], None] | None = None) -> bool:
        """Move the session to a database of its own (see the module docstring, point 4); False if the user
        may not create one (then ``close`` reports which of ``schemas`` were left behind, through ``say``)."""
        if self.database is not None:
            return True
        import psycopg  # noqa: PLC0415

        with psycopg.connect(self._raw, connect_timeout=5, autocommit=True) as conn:
            try:
                assert self._keeper is not None
                name = session_schema.create_database(conn, self._keeper)
            except psycopg.errors.InsufficientPrivilege:
                there = {r[0] for r in conn.execute("SELECT nspname FROM pg_namespace WHERE nspname = ANY(%s)",
                                                    (list(schemas),)).fetchall()}
                self._watched, self._say = [s for s in schemas if s not in there], say
                return False
            if self.schema is not None:
                session_schema.drop(conn, self.schema)
                self.schema = None
        self.database = name
        self._dsn = with_database(self._raw, name)
        return True

    def check_connections(self, jobs: int) -> None:
        """Raise ``dsn-too-few-connections`` (one line) unless the database lets a session of ``jobs`` runs at
        once open the connections it needs (``capacity.check``; ``open`` checked one run at a time)."""
        if self._keeper is not None:
            capacity.check(self._keeper, jobs)

    def jobs_that_fit(self, jobs: int) -> int:
        """The most runs at once, at most ``jobs``, whose connections the database allows (``capacity``)."""
        return jobs if self._keeper is None else capacity.jobs_that_fit(self._keeper, jobs)

    def close(self) -> None:
        """Drop the session's schema (and all in it), or its own database; the user's database is never
        dropped. Idempotent."""
        schema, self.schema = self.schema, None
        database, self.database = self.database, None
        keeper, self._keeper = self._keeper, None
        if schema is None and database is None:
            if keeper is not None:
                keeper.close()
            return
        import psycopg  # noqa: PLC0415

        try:
            with psycopg.connect(self._raw, connect_timeout=5, autocommit=True) as conn:
                if database is not None:
                    session_schema.drop_database(conn, database)
                if schema is not None:
                    session_schema.drop(conn, schema)
                self._report_leftovers(conn)
        except psycopg.Error:
            pass  # the server is gone: a later run reaps the schema once this process has ended
        finally:
            if keeper is not None:
                keeper.close()  # the lock goes last: until the schema is gone, it is this session's

    def _report_leftovers(self, conn: psycopg.Connection) -> None:
        """One line naming the schemas the session's framework made in the user's database (not isolated)."""
        watched, self._watched = self._watched, []
        if not watched or self._say is None:
            return
        rows = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname = ANY(%s)", (watched,)).fetchall()
        left = [r[0] for r in rows]
        if left:
            drop = "; ".join(f'DROP SCHEMA "{name}" CASCADE' for name in left)
            self._say(f"left behind: schema {', '.join(left)} in database {database_name(self._raw)!r}, made by "
                      f"the workers (killpoint may not create a database of its own for them: no CREATEDB); "
                      f"remove with: {drop}")
