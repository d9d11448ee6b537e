"""A TLS context's certificate authorities loaded when the context is first used, not when it is made.

An SDK's HTTP client makes an `ssl.SSLContext` and loads a CA bundle into it as the client is made: httpx
and httpx2 parse certifi's ~150 certificates (`load_verify_locations`), `ssl.create_default_context()` the
system's (`set_default_verify_paths`), ~20 ms of CPU each, in every incarnation that makes a client (a
LangGraph `ChatOpenAI` makes two). A crash test's services are plain HTTP on 127.0.0.1, so those contexts
are never used unless a step reaches an allowed host over TLS (`--allow-egress`). `install()`, run in a fork
server before it forks, defers that work to where it is needed:

1. `SSLContext.load_verify_locations(cafile=..., cadata=...)` and `set_default_verify_paths()` record the
   call on the context instead of parsing (a `cafile` that does not exist still raises at once, as it did;
   `capath` alone is not deferred: OpenSSL reads such a folder lazily already).
2. The first use of the context's trust store runs the recorded calls, in order, then does what was asked:
   a handshake's socket or memory BIO (`_wrap_socket`, `_wrap_bio`: what `wrap_socket`, `wrap_bio`,
   asyncio, anyio and trio all call), `get_ca_certs`, `cert_store_stats`. An error in a recorded call (a
   bundle that does not parse) is raised there, by the call that needed the store.
3. Contexts are made and used as before otherwise: nothing is shared between contexts or processes, and a
   context whose store is never used is never loaded.

What differs from loading at once, and why it is safe here: the default paths (`SSL_CERT_FILE`,
`SSL_CERT_DIR`) are read when the store is first used rather than when the context was made, and a bundle
that does not parse fails at the handshake instead of at the client's construction. A worker's environment
is set before it starts and killpoint never hands it a malformed bundle.
"""

from __future__ import annotations

import os
import ssl
import threading
from collections.abc import Callable
from typing import Any

_PENDING = "_killpoint_pending_ca"
"""The attribute of a context holding its recorded calls (`ssl.SSLContext` instances have a `__dict__`)."""

_USES = ("_wrap_socket", "_wrap_bio", "get_ca_certs", "cert_store_stats")
"""The methods that use a context's trust store: each runs the context's recorded calls first."""

_lock = threading.Lock()
_originals: dict[str, Callable[..., Any]] = {}


def install() -> None:
    """Defer CA loading on every `ssl.SSLContext` made from now on in this process and its forks (1-3 of the
    module docstring). Idempotent."""
    cls = ssl.SSLContext
    if not _originals:
        for name in ("load_verify_locations", "set_default_verify_paths", *_USES):
            _originals[name] = getattr(cls, name)
        for name in _USES:
            setattr(cls, name, _flushing(name))
    cls.load_verify_locations = _load_verify_locations  # type: ignore[method-assign]
    cls.set_default_verify_paths = _set_default_verify_paths  # type: ignore[method-assign]


def uninstall() -> None:
    """Contexts made from now on load their bundles at once again; those made before still load theirs at
    their first use (the methods that use the store keep flushing, a no-op on a context with nothing
    recorded)."""
    for name in ("load_verify_locations", "set_default_verify_paths"):
        if name in _originals:
            setattr(ssl.SSLContext, name, _originals[name])


def _load_verify_locations(self: ssl.SSLContext, cafile: Any = None, capath: Any = None,
                           cadata: Any = None) -> None:
    if cafile is None and cadata is None:
        return _originals["load_verify_locations"](self, cafile, capath, cadata)
    if cafile is not None:
        os.stat(cafile)  # a missing bundle fails here, as it did
    _record(self, "load_verify_locations", (cafile, capath, cadata))
    return None


def _set_default_verify_paths(self: ssl.SSLContext) -> None:
    _record(self, "set_default_verify_paths", ())


def _record(ctx: ssl.SSLContext, name: str, args: tuple) -> None:
    with _lock:
        ctx.__dict__.setdefault(_PENDING, []).append((name, args))


def flush(ctx: ssl.SSLContext) -> None:
    """Run the calls recorded on `ctx`, in order (2. of the module docstring); nothing if none."""
    if _PENDING not in ctx.__dict__:
        return
    with _lock:
        pending = ctx.__dict__.pop(_PENDING, [])
        for name, args in pending:
            _originals[name](ctx, *args)


def _flushing(name: str) -> Callable[..., Any]:
    original = _originals[name]

    def method(self: ssl.SSLContext, *args: Any, **kwargs: Any) -> Any:
        flush(self)
        return original(self, *args, **kwargs)

    method.__name__ = name
    return method
