"""Postgres for killpoint: one interface (``PostgresHandle``) over four providers.

``provide(kind="auto", dsn=None, allow_any_dsn=False, on_choice=None)`` is a context manager yielding a
started ``PostgresHandle``; leaving the block (normally, by an exception, or by Ctrl-C) stops the server
and removes its folder. Every ``provide()`` first reaps clusters left by dead processes (``reaper``).
Handles still open at interpreter exit are closed by an ``atexit`` hook.

Providers: ``local`` (this machine's binaries), ``docker`` (testcontainers), ``embedded`` (pgserver's
binaries), ``dsn`` (a database the user names; never dropped, never crashed). ``auto`` picks as
``auto.open_server`` documents.

libpq's environment variables (``PGSSLMODE``, ``PGOPTIONS``, ``PGSERVICE``...) are the user's settings for the
user's servers: ``provide`` keeps them out of ``os.environ`` while it holds a server killpoint starts itself
(``libpq_env.ignored``); on a ``dsn`` server they apply.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from killpoint.env.postgres.capacity import DEFAULT_SERVER
from killpoint.env.postgres.handle import KINDS, PostgresHandle

__all__ = ["PostgresHandle", "provide", "open_server", "KINDS"]

_open: set[PostgresHandle] = set()
_lock = threading.Lock()


def open_server(
    kind: str = "auto",
    dsn: str | None = None,
    allow_any_dsn: bool = False,
    on_choice: Callable[[str], None] | None = None,
    connections: int = DEFAULT_SERVER,
) -> PostgresHandle:
    """Reap orphans, then start/open a server (see ``auto.open_server``). Close it yourself, or use ``provide``."""
    from killpoint.env.postgres.auto import open_server as _open_server  # noqa: PLC0415
    from killpoint.env.postgres.cleanup import reap_all  # noqa: PLC0415

    reap_all()
    handle = _open_server(kind, dsn, allow_any_dsn, on_choice, connections)
    with _lock:
        _open.add(handle)
    return handle


def close_server(handle: PostgresHandle) -> None:
    """Close ``handle`` and forget it (idempotent)."""
    try:
        handle.close()
    finally:
        with _lock:
            _open.discard(handle)


@contextmanager
def provide(
    kind: str = "auto",
    dsn: str | None = None,
    allow_any_dsn: bool = False,
    on_choice: Callable[[str], None] | None = None,
    connections: int = DEFAULT_SERVER,
) -> Iterator[PostgresHandle]:
    """A started server for the ``with`` block; always torn down on the way out. An owned one (no ``dsn``)
    is started with room for ``connections``, used and stopped with libpq's variables out of the
    environment (see the module doc)."""
    from killpoint.env.postgres import libpq_env  # noqa: PLC0415

    owned = kind not in ("auto", "dsn") or (kind == "auto" and not dsn)
    with libpq_env.ignored() if owned else contextlib.nullcontext():
        handle = open_server(kind, dsn, allow_any_dsn, on_choice, connections)
        try:
            yield handle
        finally:
            close_server(handle)


@atexit.register
def _close_all() -> None:
    for handle in list(_open):
        try:
            close_server(handle)
        except Exception:  # noqa: BLE001 - best effort at exit; the reaper covers the rest
            pass
