"""The HTTP server every fake runs on: per-run routing, JSON replies, resets, clean stops.

Contract:

- ``http.server`` with one daemon thread per connection, HTTP/1.1 keep-alive and ``TCP_NODELAY``
  (without it, Python's server pays ~40 ms per request to Nagle and delayed ACKs). Each reply is
  written with a single ``send``.
- ``POST /runs/<run_id>/<route>`` goes to ``routes[route]`` with that run id (percent-decoded);
  a path without the prefix is attributed to run ``"default"``. ``/_admin/...`` is the admin interface.
  A route's value is an endpoint (it takes POST) or a mapping of methods to endpoints
  (``{"GET": ..., "POST": ...}``); a route may hold ``{name}`` segments, each matching one path segment
  and handed to the endpoint in ``Request.params`` (``/v1/charges/{id}``). No route -> 404, another
  method -> 405; a server given ``unknown(method, route)`` answers both with it (an API's own 404).
- A reply with ``drop`` set sends nothing: the socket is closed with ``SO_LINGER`` 0, so the client
  sees a connection reset.
- A client that goes away mid-request (the harness killed the worker while the hook held it) is not an
  error: nothing is printed. An endpoint that raises is answered 500 and its attempt ends
  ``internal-error``, with a traceback on stderr.
- ``stop()`` stops accepting, shuts down open connections and joins the connection threads (a thread
  still held by the hook is left to its daemon fate after ``timeout``).
"""

from __future__ import annotations

import os
import re
import select
import selectors
import socket
import struct
import sys
import threading
import traceback
from collections.abc import Callable, Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from . import admin
from .state import State
from .wire import BadRequest, Reply, Request, error_body

Endpoint = Callable[[Request], Reply]
Route = Endpoint | Mapping[str, Endpoint]
"""An endpoint taking POST, or endpoints by method."""

RUN_PREFIX = "/runs/"
DEFAULT_RUN = "default"
POLL_SECONDS = 0.02
"""How often ``serve_forever`` (``python -m fake_services``) looks for a stop request. A server ``start``ed
in a thread polls nothing: ``stop()`` wakes its accept loop through a pipe (six idle fakes polled 50 times a
second cost a session ~8.5 ms of CPU a second, and their stops ~90 ms)."""
_LINGER_RESET = struct.pack("ii", 1, 0)


def split_run(path: str) -> tuple[str, str] | None:
    """``/runs/r-1/v1/emails`` -> ``("r-1", "/v1/emails")``; no prefix -> ``("default", path)``."""
    if not path.startswith(RUN_PREFIX):
        return DEFAULT_RUN, path
    segment, _, rest = path[len(RUN_PREFIX):].partition("/")
    if not segment:
        return None
    return unquote(segment), "/" + rest


def compile_routes(
    routes: Mapping[str, Route],
) -> tuple[dict[str, dict[str, Endpoint]], list[tuple[re.Pattern[str], dict[str, Endpoint]]]]:
    """Exact routes by path, and ``{name}`` patterns in the order given; each with endpoints by method."""
    exact: dict[str, dict[str, Endpoint]] = {}
    patterns: list[tuple[re.Pattern[str], dict[str, Endpoint]]] = []
    for path, route in routes.items():
        methods = {"POST": route} if callable(route) else {m.upper(): e for m, e in route.items()}
        if "{" not in path:
            exact[path] = methods
            continue
        regex = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(path))
        patterns.append((re.compile(regex + "$"), methods))
    return exact, patterns


def hung_up(conn: socket.socket) -> bool:
    """True if the client has closed its end of `conn` (its FIN is queued: a peek reads end of file). A client
    that waits for its answer never has; a process that died after writing its request has (the kernel
    closes its sockets). Never blocks (a zero-timeout poll first: a socket with a timeout would wait in
    `recv` for data); False on any error, or if more data waits."""
    try:
        poller = select.poll()
        poller.register(conn, select.POLLIN)
        if not poller.poll(0):
            return False
        return conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except (OSError, ValueError):
        return False


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Overloaded" if status == 529 else "Unknown"


class Handler(BaseHTTPRequestHandler):
    """Reads a request, hands it to the server's router, writes the reply in one piece."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: FakeServer

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: the journal is the log."""

    def _read_body(self) -> bytes:
        """The request body, by Content-Length or chunked transfer coding (trailers skipped)."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _dispatch(self, method: str) -> None:
        try:
            body = self._read_body()
        except ValueError:
            self.close_connection = True
            self._send(Reply.json(400, error_body("invalid_request_error", "malformed body framing")))
            return
        headers = {name.lower(): value for name, value in self.headers.items()}
        reply = self.server.route(method, self.path, headers, body, peer=self.client_address[:2],
                                  hung_up=hung_up(self.connection))
        self._send(reply)

    def _send(self, reply: Reply) -> None:
        if reply.drop:
            self.close_connection = True
            self.server.mark_drop(self.connection)
            return
        lines = [
            f"HTTP/1.1 {reply.status} {_phrase(reply.status)}",
            f"Content-Type: {reply.content_type}",
            f"Content-Length: {len(reply.body)}",
        ]
        lines += [f"{name}: {value}" for name, value in reply.headers.items()]
        if self.close_connection:
            lines.append("Connection: close")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        try:
            self.wfile.write(head + reply.body)
        except OSError:
            self.close_connection = True
            if reply.attempt is not None:
                self.server.state.journal.mark(reply.attempt, client_gone=True)


class FakeServer(ThreadingHTTPServer):
    """One fake service on one port. ``routes`` maps a route (``/v1/emails``) to its endpoint."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = 128  # the default 5 drops SYNs when workers connect at once: 1 s retransmits

    def __init__(
        self, name: str, routes: Mapping[str, Route], state: State, host: str = "127.0.0.1", port: int = 0,
        unknown: Callable[[str, str], Reply] | None = None,
    ) -> None:
        self.name = name
        self.unknown = unknown
        self.routes = dict(routes)
        self._exact, self._patterns = compile_routes(self.routes)
        self.state = state
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._to_drop: set[socket.socket] = set()
        self._workers: set[threading.Thread] = set()
        self._serving: threading.Thread | None = None
        self._wake: tuple[int, int] | None = None  # the pipe `stop` writes to, to end `_accept_loop`
        super().__init__((host, port), Handler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://{self.server_address[0]}:{self.port}"

    def find(self, route: str) -> tuple[dict[str, Endpoint], dict[str, str]] | None:
        """The endpoints by method serving ``route`` and the values of its ``{name}`` segments."""
        methods = self._exact.get(route)
        if methods is not None:
            return methods, {}
        for pattern, methods in self._patterns:
            match = pattern.match(route)
            if match:
                return methods, {name: unquote(value) for name, value in match.groupdict().items()}
        return None

    def route(self, method: str, raw_path: str, headers: dict[str, str], body: bytes,
              peer: tuple[str, int] | None = None, hung_up: bool = False) -> Reply:
        """Turn one request into a reply (never raises)."""
        parts = urlsplit(raw_path)
        path, query = parts.path, dict(parse_qsl(parts.query))
        if path.startswith(admin.PREFIX):
            return admin.reply(self.state, self.name, method, path, query, body)
        split = split_run(path)
        found = self.find(split[1].rstrip("/")) if split else None
        endpoint = found[0].get(method) if found else None
        if endpoint is None and self.unknown is not None:
            return self.unknown(method, split[1] if split else path)
        if split is None or found is None:
            return Reply.json(404, error_body("not_found", f"fake {self.name}: no route {path}"))
        methods, params = found
        if endpoint is None:
            return Reply.json(405, error_body("method_not_allowed", f"{path} takes {' or '.join(methods)}"))
        request = Request(self.state, self.name, method, split[0], split[1].rstrip("/"), path, query, headers, body,
                          params=params, peer=peer, hung_up=hung_up)
        try:
            reply = endpoint(request)
        except BadRequest as exc:
            reply = Reply.json(exc.status, error_body("invalid_request_error", exc.message))
        except Exception as exc:  # the hook raised, or a bug: answer, record, say so
            traceback.print_exc(file=sys.stderr)
            reply = Reply.json(500, error_body("fake_internal_error", f"{type(exc).__name__}: {exc}"))
            if request.attempt is not None and request.attempt["outcome"] == "pending":
                self.state.journal.finish(request.attempt, "internal-error", 500, error=repr(exc))
        return reply

    # connection bookkeeping -------------------------------------------------------------------

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self._serve_connection, args=(request, client_address),
            name=f"fake-{self.name}-conn", daemon=True,
        )
        with self._lock:
            self._connections.add(request)
            self._workers.add(thread)
        thread.start()

    def _serve_connection(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self._lock:
                self._workers.discard(threading.current_thread())

    def mark_drop(self, connection: socket.socket) -> None:
        """Close this connection with a reset (not a FIN) once its handler is done."""
        with self._lock:
            self._to_drop.add(connection)

    def shutdown_request(self, request: Any) -> None:
        with self._lock:
            self._connections.discard(request)
            drop = request in self._to_drop
            self._to_drop.discard(request)
        if drop:
            try:
                request.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
            except OSError:
                pass
            request.close()
            return
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that vanished is normal here; anything else gets a traceback."""
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)

    # lifecycle -------------------------------------------------------------------------------

    def start(self) -> FakeServer:
        """Serve in a daemon thread; return self."""
        self._wake = os.pipe()
        self._serving = threading.Thread(target=self._accept_loop, args=(self._wake[0],), name=f"fake-{self.name}",
                                         daemon=True)
        self._serving.start()
        return self

    def _accept_loop(self, wake: int) -> None:
        """Accept and hand on connections (as ``serve_forever`` does) until `wake` is readable (`stop`)."""
        with selectors.DefaultSelector() as selector:
            selector.register(self, selectors.EVENT_READ)
            selector.register(wake, selectors.EVENT_READ)
            while True:
                ready = selector.select()
                if any(key.fileobj == wake for key, _ in ready):
                    return
                if ready:
                    self._handle_request_noblock()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop accepting, close the listening socket, shut open connections, join their threads."""
        if self._serving is not None and self._wake is not None:
            os.write(self._wake[1], b"\0")
            self._serving.join(timeout)
            self._serving = None
            for fd in self._wake:
                os.close(fd)
            self._wake = None
        self.server_close()
        with self._lock:
            connections = list(self._connections)
            workers = list(self._workers)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for worker in workers:
            worker.join(timeout)
