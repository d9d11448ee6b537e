"""``killpoint doctor``: what this machine offers, proven by starting and crashing a throwaway server.

It reports Python, Docker, local Postgres binaries and the embedded server, which provider ``auto`` (or
the one asked for) picks, then starts that server, writes a row, crashes and restarts it, reads the row
back, stops it, and checks nothing was left behind. Exit 0 when that worked; otherwise the
``KillpointError`` it raised becomes one line and exit 2 (in ``killpoint.cli.main``).
"""

from __future__ import annotations

import os
import platform
import secrets
import sys
import time
from collections.abc import Callable
from pathlib import Path

from killpoint.errors import EnvironmentProblem


def survey() -> list[tuple[str, str]]:
    """(name, finding) rows for what this machine offers, without starting anything."""
    from killpoint.env.postgres import auto, docker, embedded  # noqa: PLC0415
    from killpoint.env.postgres.binaries import find_local, run_as  # noqa: PLC0415

    rows = [("python", f"{platform.python_version()} ({sys.executable})")]
    why = docker.probe()
    rows.append(("docker", f"not usable: {why}" if why else f"engine answers; image {docker.image()}"))
    bins = find_local()
    rows.append(
        (
            "local",
            f"PostgreSQL {bins.version} at {bins.bindir} (found via {bins.source}); server runs as "
            f"user {run_as().name}"
            if bins
            else f"not usable: {auto.local_probe()}",
        )
    )
    why = embedded.probe()
    bindir = embedded.bundled_bindir()
    rows.append(("embedded", f"not usable: {why}" if why else f"pgserver binaries at {bindir}"))
    return [*rows, *guards()]


def guards() -> list[tuple[str, str]]:
    """(name, finding) rows for what keeps a crash test on this machine (docs/contracts.md, "Nothing
    leaves the machine"): the egress guard and the credentials scrubbed from workers."""
    from killpoint.env import credentials, egress_shim  # noqa: PLC0415

    hook = "available" if hasattr(sys, "addaudithook") else "NOT available (Python < 3.8): workers unguarded"
    lib = egress_shim.library()
    others = (f"other --worker-cmd workers by a preloaded library ({lib}; not a statically linked program)" if lib
              else "other --worker-cmd workers are not (no C compiler builds the preloaded guard: install cc)")
    found = sorted(k for k in os.environ if credentials.is_secret(k))
    return [
        ("egress", f"audit hook {hook}: Python workers (fork server and --spawn exec) reach only loopback, the "
                   f"--dsn server and --allow-egress hosts; a --worker-cmd is guarded when it is this Python "
                   f"running a script or -m module (docs/frameworks.md), {others}"),
        ("secrets", f"{len(found)} credential variable(s) in this shell, none passed to a worker"
                    + (f" ({', '.join(found)})" if found else "") + f"; fakes for {', '.join(credentials.FAKE_KEYS)}"),
    ]


def where_clusters_live(folder: str | os.PathLike[str]) -> str:
    """Whether an owned cluster's folder is in memory or on disk, and the knob that chose it."""
    from killpoint.env.postgres import reaper  # noqa: PLC0415

    if os.environ.get("KILLPOINT_PG_ROOT"):
        return "KILLPOINT_PG_ROOT"
    if reaper.in_memory_root(Path(folder).parent):
        return f"in memory; {reaper.MEMORY_VAR}=0 puts clusters on disk"
    return f"on disk: {reaper.MEMORY_DIR} is not a tmpfs with {reaper.MEMORY_ROOM >> 30} GiB free, or {reaper.MEMORY_VAR}=0"


def run(
    kind: str = "auto",
    dsn: str | None = None,
    allow_any_dsn: bool = False,
    out: Callable[[str], None] = print,
) -> int:
    """Print the survey, prove the chosen provider end to end, return 0 (errors raise ``KillpointError``)."""
    import psycopg  # noqa: PLC0415

    from killpoint.env.postgres import provide  # noqa: PLC0415

    out("killpoint doctor")
    for name, finding in survey():
        out(f"  {name:<10} {finding}")
    t0 = time.monotonic()
    with provide(
        kind, dsn=dsn, allow_any_dsn=allow_any_dsn, on_choice=lambda m: out(f"  {'choice':<10} {m}")
    ) as pg:
        started = time.monotonic() - t0
        folder = getattr(pg, "dir", None)
        detail = f"started {pg.kind} in {started:.2f}s"
        if folder is not None:
            detail += f" under {os.path.dirname(folder)} ({where_clusters_live(folder)})"
        name = f"killpoint_doctor_{secrets.token_hex(6)}_test"  # one per run: two doctors never share it
        probe_db = pg.create_database(name)
        with psycopg.connect(probe_db, autocommit=True) as conn:
            conn.execute("CREATE TABLE proof (x int)")
            conn.execute("INSERT INTO proof VALUES (42)")
        if pg.owned:
            t1 = time.monotonic()
            pg.crash()
            pg.restart()
            detail += f"; crash+restart in {time.monotonic() - t1:.2f}s"
        with psycopg.connect(probe_db) as conn:
            if conn.execute("SELECT x FROM proof").fetchone() != (42,):
                raise EnvironmentProblem(
                    "doctor-lost-row",
                    f"a committed row was lost across the {pg.kind} crash and restart",
                    "report this: the server is not durable",
                )
        pg.drop_database(name)
    if folder is not None and os.path.exists(folder):
        raise EnvironmentProblem(
            "doctor-left-behind",
            f"the throwaway server's folder {folder} was not removed",
            "report this with the output of `killpoint doctor`",
        )
    out(f"  {'server':<10} {detail}; committed row survived; stopped and removed")
    out(f"ok: this machine can run killpoint (Postgres: {pg.kind})")
    return 0
