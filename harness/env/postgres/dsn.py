"""``dsn``: a database the user names. killpoint never drops it, never crashes the server, and refuses a
database whose name does not contain ``test`` unless told ``--allow-any-dsn`` (it will write tables into it).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from killpoint.env.postgres.handle import PostgresHandle
from killpoint.errors import EnvironmentProblem, UsageError


def database_name(dsn: str) -> str:
    """The database a DSN names (URL or ``key=value`` form), as libpq would resolve it."""
    from psycopg.conninfo import conninfo_to_dict  # noqa: PLC0415

    try:
        params = conninfo_to_dict(dsn)
    except Exception as exc:  # noqa: BLE001 - psycopg raises ProgrammingError for junk
        raise UsageError(
            "dsn-invalid",
            f"cannot parse the DSN ({exc})",
            "pass a libpq URL like postgresql://user@host:5432/mytest",
        ) from None
    return str(params.get("dbname") or params.get("user") or "")


def check_safe(dsn: str, allow_any_dsn: bool) -> None:
    """Raise ``UsageError`` unless the database name contains ``test`` or ``allow_any_dsn`` is set."""
    name = database_name(dsn)
    if "test" in name.lower() or allow_any_dsn:
        return
    raise UsageError(
        "dsn-not-test",
        f"refusing database {name!r}: its name does not contain 'test', and killpoint creates tables and "
        "databases on the server it is given, so it could damage real data",
        "point --dsn at a database whose name contains 'test', or pass --allow-any-dsn if you are sure",
    )


class DsnServer(PostgresHandle):
    """A server named by the user. Not owned: ``crash``/``restart`` raise; ``close`` drops only what we made."""

    kind = "dsn"
    owned = False

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn

    @classmethod
    def open(cls, dsn: str, allow_any_dsn: bool = False) -> DsnServer:
        """Check the name is safe and the server answers; raise a one-line error otherwise."""
        check_safe(dsn, allow_any_dsn)
        import psycopg  # noqa: PLC0415

        try:
            with psycopg.connect(dsn, connect_timeout=5):
                pass
        except psycopg.OperationalError as exc:
            why = str(exc).strip().splitlines()[0].rstrip(".?")[:200]
            where = urlsplit(dsn).hostname if "://" in dsn else "the server"
            raise EnvironmentProblem(
                "dsn-refused",
                f"cannot connect to the DSN you gave ({where}): {why}",
                "start that server or fix host, port, user and password in --dsn; or omit --dsn to let "
                "killpoint start its own Postgres",
            ) from None
        return cls(dsn)

    @property
    def dsn(self) -> str:
        return self._dsn

    @property
    def admin_dsn(self) -> str:
        return self._dsn

    def _final_name(self, name: str) -> str:
        """Databases made next to the user's always carry ``test`` in their name."""
        final = super()._final_name(name)
        return final if "test" in final else super()._final_name(f"test_{name}")

    def close(self) -> None:
        """Nothing to stop; the user's database is never dropped."""
