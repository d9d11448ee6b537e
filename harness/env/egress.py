"""The egress guard: a Python worker (and a fork server while it imports the agent) reaches only loopback
(the fakes, the recording proxies, Postgres), the `--dsn` server's host and the hosts of `--allow-egress`.

A crash test replays an agent's steps hundreds of times: one request that leaves the machine is a real
email, a real refund or a real model call, hundreds of times. So every connection is checked before it is
made, by an audit hook of the interpreter (`sys.addaudithook`, PEP 578), which sees every
`socket.getaddrinfo` (before the DNS query) and `socket.connect` (before the first packet):

1. `install(allowed)`: the hook, installed before the agent is imported (the fork server's `serve`, the
   exec'd worker's entry `python -m killpoint.env.egress`); every process forked after inherits it.
   `allowed` comes from `ALLOW_VAR` (comma-separated hosts or addresses; `*` turns the guard off).
2. An address is allowed if it is a unix socket, loopback (`localhost`, 127/8, ::1), or one of `allowed`
   (a name, or an address a name of `allowed` resolves to).
3. Anything else is refused: `EgressBlocked` (a `PermissionError`) is raised in the caller naming host,
   port and the fix; a line starting with `MARKER` goes to stderr (the incarnation's log); and an
   `egress.blocked` note (host, port, call site) goes to the harness over the kill-point socket, or, in
   a fork server that has no run yet, waits in `pending` until the forked worker knows its run (`flush`).
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import sys
import threading
import traceback
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

ALLOW_VAR = "KILLPOINT_EGRESS_ALLOW"
"""The hosts a worker may reach besides loopback, comma-separated (`*`: all; unset: the guard is off)."""

RUN_ARG = "--run"
"""`python -m killpoint.env.egress --run SPEC ARGS`: a black-box Python worker exec'd behind the guard (`main`)."""

MARKER = "killpoint: egress blocked:"
"""How a refused connection starts its line in a worker's log."""

FIX = ("point the SDK at its fake (OPENAI_BASE_URL, ANTHROPIC_BASE_URL, RESEND_API_URL, STRIPE_BASE_URL, or an "
       "--effect proxy's KILLPOINT_EFFECT_<NAME>_URL; docs/contracts.md, \"Nothing leaves the machine\"), "
       "or pass --allow-egress HOST if it is meant")


class EgressBlocked(PermissionError):
    """A connection the egress guard refused, before any packet left."""

    def __init__(self, host: str, port: object) -> None:
        self.host, self.port = host, port
        super().__init__(f"{MARKER} {host}:{port} is not reachable in a crash test (only loopback and the "
                         f"--dsn server are). Fix: {FIX}")


_allowed: frozenset[str] = frozenset()
_active = True  # False in the harness's own process outside `guarding()`
_allowed_ips: set[str] | None = None  # addresses the allowed names resolve to, once asked
_installed = False
_inside = threading.local()  # the guard's own lookups and reports are not checked again
pending: list[dict] = []
"""Blocked attempts not yet reported (no run to report them to: a fork server importing the agent)."""


def allowed_from_env() -> frozenset[str] | None:
    """The hosts `ALLOW_VAR` names; None if it is unset or `*` (no guard)."""
    raw = os.environ.get(ALLOW_VAR)
    if raw is None or raw.strip() == "*":
        return None
    return frozenset(h.strip().lower() for h in raw.split(",") if h.strip())


def install(allowed: Iterable[str]) -> None:
    """Refuse every connection but to loopback and `allowed` from now on, in this process and every
    process forked from it (idempotent: a second call only replaces the hosts)."""
    global _allowed, _allowed_ips, _installed
    _allowed, _allowed_ips = frozenset(h.lower() for h in allowed), None
    if not _installed:
        sys.addaudithook(_hook)
        _installed = True


@contextmanager
def guarding() -> Iterator[None]:
    """Within: this process is guarded, with the hosts of `ALLOW_VAR` if it is set (`*`: not guarded),
    else loopback only (the harness imports the step module itself to check it); after, the hook stays
    (an audit hook cannot be removed) but lets everything through."""
    global _active
    hosts = allowed_from_env() if ALLOW_VAR in os.environ else frozenset()
    if hosts is None:
        yield
        return
    install(hosts)
    _active = True
    try:
        yield
    finally:
        _active = False


def install_from_env() -> bool:
    """`install` with the hosts of `ALLOW_VAR`; False (nothing installed) when the guard is off."""
    hosts = allowed_from_env()
    if hosts is None:
        return False
    install(hosts)
    return True


def is_allowed(host: str) -> bool:
    """True if `host` (a name or an address) is loopback or allowed (2. of the module docstring)."""
    host = host.strip("[]").lower()
    if host in ("", "localhost") or host.endswith(".localhost") or host in _allowed:
        return True
    try:
        addr = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return False
    if addr.is_loopback or (getattr(addr, "ipv4_mapped", None) and addr.ipv4_mapped.is_loopback):
        return True
    return host in _resolved()


def _resolved() -> set[str]:
    global _allowed_ips
    if _allowed_ips is None:
        ips: set[str] = set()
        _inside.on = True
        try:
            for name in _allowed:
                try:
                    ips |= {str(info[4][0]).lower() for info in socket.getaddrinfo(name, None)}
                except OSError:
                    continue
        finally:
            _inside.on = False
        _allowed_ips = ips
    return _allowed_ips


def _hook(event: str, args: tuple) -> None:
    if event == "socket.getaddrinfo":
        host, port = args[0], args[1]
    elif event == "socket.connect":
        address = args[1]
        if not isinstance(address, tuple) or len(address) < 2:
            return  # a unix socket (a path), or a family without a host
        host, port = address[0], address[1]
    else:
        return
    if not _active or getattr(_inside, "on", False) or host is None:
        return
    host = host.decode(errors="replace") if isinstance(host, bytes) else str(host)
    if is_allowed(host):
        return
    _blocked(host, port)


def _blocked(host: str, port: object) -> None:
    site = _call_site()
    attempt = {"host": host, "port": port, "site": site}
    sys.stderr.write(f"{MARKER} {host}:{port} from {site}\n")
    sys.stderr.flush()
    pending.append(attempt)
    flush()
    raise EgressBlocked(host, port)


def _call_site() -> str:
    """The innermost frame outside the standard library's socket code, ours, and the HTTP stacks'."""
    skip = ("/socket.py", "/egress.py", "/ssl.py", "/asyncio/", "httpcore", "httpx", "urllib3", "/http/client.py",
            "anyio", "/requests/", "/aiohttp/")
    for frame in reversed(traceback.extract_stack()[:-1]):
        if not any(s in frame.filename for s in skip):
            return f"{frame.filename}:{frame.lineno} in {frame.name}"
    return "?"


def flush() -> None:
    """Send the `pending` attempts to the harness as `egress.blocked` notes, if this process belongs to a
    run (`KILLPOINT_SOCKET`, `KILLPOINT_RUN_ID`); else they wait for the next call."""
    path, run_id = os.environ.get("KILLPOINT_SOCKET"), os.environ.get("KILLPOINT_RUN_ID")
    if not path or not run_id or not pending:
        return
    attempts = list(pending)
    pending.clear()
    _inside.on = True
    try:
        channel = sys.modules.get("killpoint.reference_agent.killpoints")  # the worker's own connection
        if channel is not None:
            for a in attempts:
                channel.note("egress.blocked", run_id=run_id, **a)
            return
        lines = b"".join((json.dumps({"v": 1, "kind": "note", "note": "egress.blocked", "run_id": run_id, **a,
                                      "pid": os.getpid(), "incarnation": os.environ.get("KILLPOINT_INCARNATION", "")},
                                     default=str) + "\n").encode() for a in attempts)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(path)
            sock.sendall(lines)
    except OSError:
        pass  # the harness is gone: the worker's own channel will say so
    finally:
        _inside.on = False


def main() -> None:
    """`python -m killpoint.env.egress ARGS`: the exec'd reference worker, guarded before it imports the
    agent (`python -m killpoint.reference_agent.worker ARGS` otherwise). `--run SPEC ARGS`: an exec'd
    black-box Python worker instead (`pycommand.PythonCommand.guarded_argv`), run as `__main__` with
    `sys.path[0]` its folder, as `python SCRIPT ARGS` or `python -m MODULE ARGS` would."""
    import runpy  # noqa: PLC0415

    install_from_env()
    if len(sys.argv) > 2 and sys.argv[1] == RUN_ARG:
        from killpoint.env import pymain  # noqa: PLC0415 - only this entry needs it

        spec = json.loads(sys.argv[2])
        sys.path.insert(0, spec["folder"])  # -P left the entry's folder out; a fresh interpreter's is this
        pymain.finish(pymain.run_main(spec, sys.argv[3:]))
    sys.argv[0] = "killpoint.reference_agent.worker"
    runpy.run_module("killpoint.reference_agent.worker", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
