"""``killpoint serve``: a session's start-up paid once, for the edit loop (docs/performance.md, "start-up").

A `killpoint replay`, `explore` or `run` spends about 3 s before its first trial on an idle 2-core machine:
two fork servers importing the anthropic SDK and the reference worker (1.2-1.6 CPU-seconds each) and a
Postgres copied from its template and started (~1 s). `serve` does both once and stays in the foreground:

1. It starts the zygotes (harness/env/zygote.py: one preloaded interpreter per hash seed, which fork a
   session's fork servers and its step module's probe on request) and a Postgres (`--postgres`, chosen as
   every command chooses one), with a test database of its own (`DATABASE`).
2. Once the zygotes listen, it prints what a session needs to use them, as lines to paste: the
   `export ZYGOTE_VAR=<folder>` and the `--dsn` to pass (`ready_lines`).
3. A session started with that variable forks its fork servers and its probe from the zygotes where they can
   stand in (the same interpreter, the same `PYTHON*`/`LD_*` start-up variables; else it starts them as
   always, so a stale variable costs time, never a wrong result). With that `--dsn` it works in a schema of
   its own on the served database, dropped at its end; `db-crash` is skipped there, as on any `--dsn`
   (the server is shared), so CI runs without `serve`.
4. Ctrl-C or SIGTERM stops the zygotes (and whatever they forked) and the Postgres, and removes their folders
   (`main`'s signal handling unwinds the `with` blocks). SIGKILLed, the zygotes end on their stdin's end and
   the Postgres with its parent (their parent-death signals), and the next killpoint's reaper removes the
   cluster's folder.
"""

from __future__ import annotations

import shlex
import signal
from collections.abc import Callable, Iterable

from killpoint.errors import EnvironmentProblem

DATABASE = "killpoint_serve_test"
"""The served database: its name has the word `test`, so a session takes it as `--dsn` without
`--allow-any-dsn`."""
READY_TIMEOUT = 120.0
"""How long the zygotes may take to import what they preload (1-2 s idle; minutes on a machine under load)."""


LAST_LINE = "killpoint serve: Ctrl-C stops it (its zygotes and its Postgres, and their folders)"
"""The last of the ready lines: a program reading serve's output reads up to it (`parse_ready`)."""


def ready_lines(folder: str, dsn: str) -> list[str]:
    """What `serve` prints once ready (flow step 2): the shell line to paste and the option to pass."""
    from killpoint.env.zygote import ZYGOTE_VAR  # noqa: PLC0415

    return ["killpoint serve: ready; in the shell that runs killpoint:",
            f"  export {ZYGOTE_VAR}={shlex.quote(folder)}",
            f"  killpoint replay|explore|run ... --dsn {shlex.quote(dsn)}",
            LAST_LINE]


def parse_ready(lines: Iterable[str]) -> tuple[str, str] | None:
    """The zygotes' folder and the `--dsn` from serve's output (what `ready_lines` printed), read up to its last
    ready line; None if the output ended first (serve failed: its error is the line before)."""
    from killpoint.env.zygote import ZYGOTE_VAR  # noqa: PLC0415

    folder = dsn = None
    for line in lines:
        if line.startswith(f"  export {ZYGOTE_VAR}="):
            folder = shlex.split(line.split("=", 1)[1])[0]
        elif line.startswith("  killpoint ") and " --dsn " in line:
            dsn = shlex.split(line.split(" --dsn ", 1)[1])[0]
        elif line.rstrip("\n") == LAST_LINE:
            return (folder, dsn) if folder and dsn else None
    return None


def run(postgres: str, say: Callable[[str], None]) -> int:
    """Serve until a signal ends it (flow steps 1-4); the exit code is then `main`'s (130 or 143)."""
    from killpoint.env.postgres import provide  # noqa: PLC0415
    from killpoint.env.postgres.capacity import server_connections  # noqa: PLC0415
    from killpoint.env.zygote import Zygotes  # noqa: PLC0415
    from killpoint.run.cores import usable  # noqa: PLC0415
    from killpoint.run.pool import widest  # noqa: PLC0415

    # room for a session that widens over every core here (a session asking more is held to what fits)
    with Zygotes() as zygotes, provide(kind=postgres, on_choice=say, connections=server_connections(widest(usable()))) as pg:
        dsn = pg.create_database(DATABASE)
        if not zygotes.wait(READY_TIMEOUT):
            raise EnvironmentProblem("zygote-not-ready", f"the zygotes did not finish their imports within "
                                     f"{READY_TIMEOUT:.0f} s", "run `killpoint doctor`, or try again on a "
                                     "machine with less load")
        for line in ready_lines(str(zygotes.folder), dsn):
            say(line)
        while True:
            signal.pause()  # until Ctrl-C or SIGTERM: `main`'s handlers raise, and the `with` blocks clean up
