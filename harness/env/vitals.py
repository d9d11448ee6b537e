"""The environment's vital signs: whether a process the whole session depends on died under it.

A session stands on processes killpoint started and never stops on purpose while runs go on: the owned
Postgres's postmaster (``LocalServer``; ``db-crash`` stops it on purpose, and that is not a death) and the
fork servers that fork the agent's workers (``ForkLauncher``). When one of them is killed from outside (the
OOM killer, a user, a test), every later trial would fail for a reason that has nothing to do with the agent.

1. Each such owner says what died, or None: ``died() -> str | None`` (``LocalServer.died``,
   ``ForkLauncher.died``). A fork server's death is also seen at once by the launcher, whose waiting spawns
   and incarnations are released (so nothing waits for a timeout).
2. ``check(env)`` asks them in turn and returns the ``EnvironmentGone`` error naming the first death, or None.
3. The CLI asks ``check`` whenever an error escapes a run, and before it reports: a death turns into that
   one line and exit 2, never into a traceback, a failing verdict or a wait.
"""

from __future__ import annotations

from typing import Any

from killpoint.errors import EnvironmentProblem

FIX = "find what killed it (the OOM killer: `dmesg | grep -i kill`; another program; a test), then run again"


class EnvironmentGone(EnvironmentProblem):
    """A process the session depends on died during the run (its runs cannot go on). Exit 2."""


def gone(code: str, what: str, fix: str = FIX) -> EnvironmentGone:
    """The error for `what` (e.g. "the local Postgres (pid 12) was killed by SIGKILL") having died mid-run."""
    return EnvironmentGone(code, f"{what} during the run: the runs cannot go on", fix)


def check(env: Any) -> EnvironmentGone | None:
    """The first death among `env`'s vital processes (its Postgres, then its launcher), or None (flow step 2).
    Never raises: an environment that is half torn down counts as alive."""
    for part, code, fix in ((getattr(env, "pg", None), "database-gone", FIX),
                            (getattr(env, "launcher", None), "forkserver-gone", f"{FIX}, or use --spawn exec")):
        died = getattr(part, "died", None)
        try:
            what = died() if callable(died) else None
        except Exception:  # noqa: BLE001 - a check that cannot tell is no death
            what = None
        if what:
            return gone(code, what, fix)
    return None


def lost(exc: BaseException) -> EnvironmentGone | None:
    """The error for a database connection lost mid-run (a server killpoint does not own, restarted or stopped
    under it), if `exc` is one; else None."""
    import psycopg  # noqa: PLC0415 - only when an error escaped a run

    if not isinstance(exc, psycopg.OperationalError):
        return None
    first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
    return gone("database-gone", f"the connection to the database was lost ({first})",
                "check that the server is up and reachable (and that nothing restarts or stops it), then run again")
