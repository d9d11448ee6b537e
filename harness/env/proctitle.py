"""What `/proc/PID/cmdline` and `/proc/PID/environ` show of a forked process: the command it stands for.

A process forked from a server (a zygote's fork server or CLI, a black-box worker's incarnation) shows the
server's command line and environment until it writes its own over them: `ps`, psutil and a worker that
reads its own command line would otherwise see `python -m killpoint.env.forkserver ...` where a fresh
process shows `python worker.py RUN_ID`.
"""

from __future__ import annotations

import ctypes


def rewrite(argv: list[str], env: dict[str, str] | None = None) -> None:
    """Write `argv` (and `env`, if given) over this process's original command line (and environment): what
    `/proc/PID/cmdline` (and `/proc/PID/environ`) show, and what every process forked from it inherits. A
    forked copy of a server shows the command it stands for, as the fresh process it replaces would; what
    does not fit in the original's room is cut (the zygote pads its own: harness/env/zygote.py)."""
    with open("/proc/self/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()  # fields 3 onward: `comm` may hold spaces
    arg_start, arg_end, env_start, env_end = (int(fields[n - 3]) for n in (48, 49, 50, 51))
    # The command line as setproctitle(3) writes one: its arguments joined by spaces, then NULs, and a last
    # byte that is not NUL, so that Linux shows it up to its first NUL (psutil splits it at the spaces),
    # not the whole padded area.
    size = arg_end - arg_start
    ctypes.memmove(arg_start, " ".join(argv).encode()[:size - 2].ljust(size - 1, b"\0") + b" ", size)
    if env is not None:
        size = env_end - env_start  # NUL after NUL ends an environment: the padding reads as nothing
        block = b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items())
        ctypes.memmove(env_start, block[:size - 1].ljust(size, b"\0"), size)
