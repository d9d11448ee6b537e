"""Choosing a provider: ``open_server(kind, ...)`` starts the one asked for, or for ``auto`` the DSN if one is
given, else the first of docker, local, embedded that starts. It reports its choice (and why each
provider before it was passed over) through ``on_choice``. When none works it raises one
``EnvironmentProblem`` naming every reason and the fix.
"""

from __future__ import annotations

from collections.abc import Callable

from killpoint.env.postgres import docker, embedded
from killpoint.env.postgres.binaries import find_local
from killpoint.env.postgres.capacity import DEFAULT_SERVER
from killpoint.env.postgres.dsn import DsnServer
from killpoint.env.postgres.handle import KINDS, PostgresHandle
from killpoint.env.postgres.local import LocalServer
from killpoint.errors import EnvironmentProblem, UsageError

AUTO_ORDER = ("docker", "local", "embedded")
NO_POSTGRES_FIX = (
    "install Postgres server binaries (Debian/Ubuntu: apt-get install postgresql), or "
    "pip install 'killpoint[embedded]', or start Docker, or pass --dsn to a test database"
)


def local_probe() -> str | None:
    """``None`` if local server binaries exist; otherwise why not."""
    if find_local() is None:
        return "no Postgres server binaries (postgres + initdb) on PATH, from pg_config, or in /usr/lib/postgresql"
    return None


FIXES = {
    "docker": "start the Docker engine (or set DOCKER_HOST to one that answers), or use --postgres auto",
    "local": "install Postgres server binaries (Debian/Ubuntu: apt-get install postgresql), or use --postgres auto",
    "embedded": "pip install 'killpoint[embedded]', or use --postgres auto",
}
PROBES: dict[str, Callable[[], str | None]] = {
    "docker": docker.probe,
    "local": local_probe,
    "embedded": embedded.probe,
}


def start_kind(kind: str, connections: int = DEFAULT_SERVER) -> PostgresHandle:
    """Start an owned server of ``kind`` (docker | local | embedded) with room for ``connections``;
    ``EnvironmentProblem`` if unavailable."""
    reason = PROBES[kind]()
    if reason is not None:
        raise EnvironmentProblem(
            f"no-{kind}", f"--postgres {kind} is not available here: {reason}", FIXES[kind]
        )
    if kind == "docker":
        return docker.DockerServer.start(connections)
    if kind == "local":
        bins = find_local()
        assert bins is not None
        return LocalServer.start(bins, kind="local", connections=connections)
    return LocalServer.start(embedded.find(), kind="embedded", connections=connections)


def open_server(
    kind: str = "auto",
    dsn: str | None = None,
    allow_any_dsn: bool = False,
    on_choice: Callable[[str], None] | None = None,
    connections: int = DEFAULT_SERVER,
) -> PostgresHandle:
    """Start or open the server ``kind`` names (see module doc); one killpoint starts gets room for
    ``connections`` (``capacity.server_connections``). The caller must ``close()`` it."""
    say = on_choice or (lambda _msg: None)
    if kind not in KINDS:
        raise UsageError(
            "bad-postgres-kind", f"unknown Postgres provider {kind!r}", f"use one of {', '.join(KINDS)}"
        )
    if kind == "dsn" or (kind == "auto" and dsn):
        if not dsn:
            raise UsageError(
                "dsn-missing", "--postgres dsn needs a DSN", "pass --dsn postgresql://user@host/my_test"
            )
        server = DsnServer.open(dsn, allow_any_dsn)
        say("postgres: using the DSN you gave (dsn)" + (" (auto: a DSN was given)" if kind == "auto" else ""))
        return server
    if kind != "auto":
        if dsn:
            raise UsageError(
                "dsn-with-owned-kind",
                f"--dsn was given with --postgres {kind}, which starts its own server and would ignore it",
                "drop --dsn, or use --postgres dsn (or auto) to use that database",
            )
        server = start_kind(kind, connections)
        say(f"postgres: {server.describe()}")
        return server
    passed: list[str] = []
    for candidate in AUTO_ORDER:
        try:
            server = start_kind(candidate, connections)
        except EnvironmentProblem as exc:
            reason = exc.message.split(": ", 1)[1] if exc.code == f"no-{candidate}" else exc.message
            passed.append(f"{candidate}: {reason}")
            continue
        why = f"; passed over {'; '.join(passed)}" if passed else ""
        say(f"postgres: auto chose {candidate} ({server.describe()}){why}")
        return server
    raise EnvironmentProblem("no-postgres", "no Postgres available: " + "; ".join(passed), NO_POSTGRES_FIX)
