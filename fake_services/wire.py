"""Requests as the endpoints see them, and the replies they return (no sockets here)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .state import State


class BadRequest(Exception):
    """Raised by an endpoint or a parser: answered with ``status`` and a JSON error."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


@dataclass
class Request:
    """One HTTP request routed to an endpoint.

    ``route`` is the path after the per-run prefix (``/v1/emails``); ``run_id`` comes from the prefix
    ``/runs/<run_id>`` (``"default"`` when the path has none); ``headers`` have lower-case names;
    ``params`` holds the values of a route pattern's ``{name}`` segments (``/v1/charges/{id}``).
    """

    state: State
    server: str
    method: str
    run_id: str
    route: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    attempt: dict[str, Any] | None = None
    params: dict[str, str] = field(default_factory=dict)
    peer: tuple[str, int] | None = None
    """The client's address (host, port): the harness finds the sending process by it (env/peers.py)."""
    hung_up: bool = False
    """True if the client had closed its end of the connection when its request was read: its process died
    after writing it (a killed worker's other thread), or it gave up waiting. The harness then gives the
    request to the incarnation that ended last, not to the live one (run/registry.py)."""

    def json(self) -> Any:
        """The body parsed as JSON; ``BadRequest`` if it is not JSON."""
        try:
            return json.loads(self.body or b"null")
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise BadRequest(f"body is not JSON: {exc}") from None


@dataclass
class Reply:
    """What to send back. ``drop`` means: send nothing, reset the connection."""

    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False
    attempt: dict[str, Any] | None = None

    @classmethod
    def json(cls, status: int, value: Any, headers: dict[str, str] | None = None) -> Reply:
        body = json.dumps(value, separators=(",", ":")).encode("utf-8")
        return cls(status, body, headers=dict(headers or {}))

    @classmethod
    def dropped(cls) -> Reply:
        return cls(0, drop=True)


def error_body(kind: str, message: str) -> dict[str, Any]:
    """The error shape the mailer, ledger and webhook answer with."""
    return {"error": {"type": kind, "message": message}}
