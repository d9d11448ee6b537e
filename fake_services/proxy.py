"""The recording proxy: killpoint between an agent and any HTTP service it has no fake for.

One proxy server per named upstream (``--effect sms=http://127.0.0.1:9000/api``). The worker is given the
proxy's per-run base URL (``http://127.0.0.1:PORT/runs/<run_id>``) in place of the upstream's; a request
to ``<that>/v1/messages`` is forwarded to ``http://127.0.0.1:9000/api/v1/messages``.

For each request:

1. a read (GET, HEAD, OPTIONS) is forwarded as it is and its answer passed back: nothing is recorded
   and no point is held, as the fakes do not record Stripe's retrieve;
2. any other method is an effect: its payload (``{"method", "path", "body"}`` plus ``"query"`` when the URL
   has one; the body as JSON when it parses as JSON, else as text) is recorded as an attempt
   (``pending``) under the upstream's name, with the ``Idempotency-Key`` header as its key and the
   digest of the payload as its ``payload_digest``;
3. hook and static faults at ``effect.received``: error -> 503, overload -> 429, drop -> reset; the
   request never reaches the upstream (``injected-error`` / ``dropped``);
4. the request is forwarded (hop-by-hop headers and ``Host`` replaced, ``Accept-Encoding: identity`` so the
   answer can be read): an upstream that cannot be reached, or does not answer within ``timeout``, is
   answered 502 (``upstream-error``); an answer other than 2xx is passed back and nothing is recorded as
   applied (``rejected``);
5. a 2xx answer to a key not applied before in this run is an applied effect. To a key applied before, it
   is ``deduplicated`` (no new effect) when the upstream says so (``Idempotent-Replayed: true``) or
   answers with the same object (the first answer's id again, the documented behaviour of idempotent
   APIs), and a second effect when it answers with another object (another id). An answer that shows
   neither (no replay header, no id: ``{"ok": true}``, or an id nested where the proxy does not look,
   Zendesk's ``{"ticket": {"id": 7}}``) proves nothing either way: the attempt is ``unproven``, with a
   ``why`` naming what could not be seen and the declaration that settles it, and no new effect (the
   exactly_once checker then says unknown, never fail). The object's id is the answer's JSON ``id``, or
   the value at the upstream's declared ``id`` path (``--effect tickets=URL,id=ticket.id``; a string or
   a number). The effect's ``id`` is that id or one derived from (service, run, order); its
   ``response`` is ``{"status", "body"}``;
6. hook and static faults at ``effect.applied``: drop -> reset (``dropped``, the effect stays), error or
   overload -> 500 (``injected-error``, the effect stays);
7. otherwise the upstream's answer is passed back: status, body and end-to-end headers (``applied``).

An upstream is declared ``NAME=URL[,id=PATH]``: names are lower-case, ``[a-z][a-z0-9_-]*``, and may not be
a fake's name; ``PATH`` is where the upstream's answers carry the object's id, dot-separated
(``ticket.id``, ``sid``, ``data.0.id``; default ``id``). The worker finds the URL in
``KILLPOINT_EFFECT_<NAME>_URL`` (upper-cased, ``-`` as ``_``). Streaming answers are read whole before
they are passed on.
"""

from __future__ import annotations

import http.client
import re
import sys
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from . import admin
from .canon import digest
from .server import FakeServer, Handler, split_run
from .state import State
from .wire import Reply, Request, error_body

NAME = re.compile(r"^[a-z][a-z0-9_-]*$")
ID_PATH = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
DEFAULT_ID_PATH = "id"
READS = frozenset({"GET", "HEAD", "OPTIONS"})
HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer", "trailers",
    "transfer-encoding", "upgrade", "host", "content-length", "accept-encoding", "proxy-connection",
})
TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class Upstream:
    """A named HTTP service behind the proxy: ``scheme://host:port`` and a base path (no trailing ``/``)."""

    name: str
    url: str
    scheme: str
    host: str
    port: int
    base_path: str
    id_path: str | None = None
    """Where the upstream's answers carry the object's id (``ticket.id``), when declared; None: ``id``."""

    @property
    def spec(self) -> str:
        """``URL[,id=PATH]``: what ``--effect NAME=`` takes for this upstream (and a replay line repeats)."""
        return self.url + (f",id={self.id_path}" if self.id_path else "")

    @property
    def env_var(self) -> str:
        """The worker's variable naming this upstream's per-run URL."""
        return env_var(self.name)


def env_var(name: str) -> str:
    """``KILLPOINT_EFFECT_<NAME>_URL`` for ``name`` (upper-cased, ``-`` as ``_``)."""
    return f"KILLPOINT_EFFECT_{name.upper().replace('-', '_')}_URL"


def split_spec(name: str, spec: str) -> tuple[str, str | None]:
    """``URL[,id=PATH]`` as (URL, PATH or None); ``ValueError`` for an option other than ``id`` or a bad path."""
    url, *options = spec.split(",")
    id_path = None
    for option in options:
        key, sep, value = option.strip().partition("=")
        if key.strip() != "id" or not sep:
            raise ValueError(f"effect {name}: {option.strip()!r} is not an option of --effect (only id=PATH, "
                             "where the answers carry the object's id, e.g. id=ticket.id)")
        if not ID_PATH.match(value.strip()):
            raise ValueError(f"effect {name}: id={value.strip()!r} is not a dot-separated path such as ticket.id")
        id_path = value.strip()
    return url.strip(), id_path


def upstream(name: str, url: str, reserved: tuple[str, ...] = ()) -> Upstream:
    """Check one upstream, ``url`` as ``URL[,id=PATH]`` (``split_spec``); ``ValueError`` naming the problem (a
    bad name, a reserved name, a bad URL, a bad option)."""
    url, id_path = split_spec(name, url)
    if not NAME.match(name):
        raise ValueError(f"effect name {name!r} must be lower-case letters, digits, '_' or '-', "
                         "starting with a letter")
    if name in reserved:
        raise ValueError(f"effect name {name!r} is a fake's name ({', '.join(reserved)})")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"effect {name}: {url!r} is not an http:// or https:// URL")
    if parts.query or parts.fragment:
        raise ValueError(f"effect {name}: {url!r} has a query or fragment; give the service's base URL")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ValueError(f"effect {name}: {url!r} has a bad port") from None
    return Upstream(name, url, parts.scheme, parts.hostname, port, parts.path.rstrip("/"), id_path)


def parse_effect(text: str, reserved: tuple[str, ...] = ()) -> Upstream:
    """``NAME=URL[,id=PATH]`` as given to ``--effect``; ``ValueError`` naming the problem."""
    name, sep, url = text.partition("=")
    if not sep or not name.strip() or not url.strip():
        raise ValueError(f"{text!r} is not NAME=URL[,id=PATH]")
    return upstream(name.strip(), url.strip(), reserved)


def body_value(body: bytes, content_type: str) -> Any:
    """A body as recorded: JSON when it parses as JSON, else text (bytes that are not UTF-8: their hex)."""
    if not body:
        return None
    if "json" in content_type or body[:1] in (b"{", b"["):
        try:
            import json  # noqa: PLC0415

            return json.loads(body)
        except (UnicodeDecodeError, ValueError):
            pass
    if "x-www-form-urlencoded" in content_type:
        try:
            return dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True))
        except UnicodeDecodeError:
            pass
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return {"hex": body.hex()}


@dataclass
class Answer:
    """What the upstream said."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes

    @property
    def content_type(self) -> str:
        return next((v for k, v in self.headers if k.lower() == "content-type"), "application/octet-stream")

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name), None)

    def reply(self) -> Reply:
        headers = {k: v for k, v in self.headers if k.lower() not in HOP_BY_HOP and k.lower() != "content-type"}
        return Reply(self.status, self.body, self.content_type, headers)


def forward(up: Upstream, method: str, path: str, raw_query: str, headers: Mapping[str, str], body: bytes,
            timeout: float = TIMEOUT_SECONDS) -> Answer:
    """Send one request to the upstream and read its whole answer (``OSError`` if it cannot be had)."""
    conn_class = http.client.HTTPSConnection if up.scheme == "https" else http.client.HTTPConnection
    conn = conn_class(up.host, up.port, timeout=timeout)
    target = up.base_path + path + (f"?{raw_query}" if raw_query else "")
    sent = {k: v for k, v in headers.items() if k.lower() not in HOP_BY_HOP}
    sent["Accept-Encoding"] = "identity"
    try:
        conn.request(method, target or "/", body=body if body or method not in READS else None, headers=sent)
        response = conn.getresponse()
        data = response.read()
        return Answer(response.status, list(response.getheaders()), data)
    except http.client.HTTPException as exc:
        raise OSError(f"bad answer from {up.url}: {exc!r}") from exc
    finally:
        conn.close()


def answer_id(response: dict[str, Any], path: str | None = None) -> str | None:
    """The object id of a recorded answer: the non-empty string or the number at ``path`` (default ``id``) of
    its JSON body, as text; None when there is none."""
    value: Any = response.get("body")
    for part in (path or DEFAULT_ID_PATH).split("."):
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    return value if isinstance(value, str) and value else None


def unproven_why(up: Upstream, key: str, status: int) -> str:
    """Why a re-sent key's 2xx answer proves neither a replay nor a second effect, and what settles it."""
    seen = f"the id at {up.id_path!r}" if up.id_path else "an 'id'"
    return (f"{up.name} answered {status} to key {key} sent again with no Idempotent-Replayed header and without "
            f"{seen} to compare with the first answer's, so whether it applied the request again cannot be "
            f"told; declare where its answers carry the object's id: --effect {up.name}={up.url},id=PATH "
            f"(e.g. id=ticket.id; pytest: --killpoint-effect)")


def upstream_failed(up: Upstream, exc: OSError) -> Reply:
    return Reply.json(502, error_body("upstream_unreachable", f"killpoint proxy {up.name}: {up.url}: {exc}"))


class ProxyHandler(Handler):
    """The fakes' handler, taking every method an HTTP API uses."""

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    def do_OPTIONS(self) -> None:
        self._dispatch("OPTIONS")


class ProxyServer(FakeServer):
    """The proxy for one upstream (see the module docstring); admin routes as every fake's."""

    def __init__(self, up: Upstream, state: State, host: str = "127.0.0.1", port: int = 0,
                 timeout: float = TIMEOUT_SECONDS) -> None:
        self.upstream = up
        self.timeout = timeout
        super().__init__(up.name, {}, state, host, port)
        self.RequestHandlerClass = ProxyHandler

    def route(self, method: str, raw_path: str, headers: dict[str, str], body: bytes,
              peer: tuple[str, int] | None = None, hung_up: bool = False) -> Reply:
        """Turn one request into a reply (never raises)."""
        parts = urlsplit(raw_path)
        if parts.path.startswith(admin.PREFIX):
            return admin.reply(self.state, self.name, method, parts.path, dict(parse_qsl(parts.query)), body)
        split = split_run(parts.path)
        if split is None:
            return Reply.json(404, error_body("not_found", f"proxy {self.name}: no run in {parts.path}"))
        run_id, path = split
        if method in READS:
            try:
                return forward(self.upstream, method, path, parts.query, headers, body, self.timeout).reply()
            except OSError as exc:
                return upstream_failed(self.upstream, exc)
        request = Request(self.state, self.name, method, run_id, path, parts.path, dict(parse_qsl(parts.query)),
                          headers, body, peer=peer, hung_up=hung_up)
        try:
            return self.effect(request, parts.query)
        except Exception as exc:  # the hook raised, or a bug: answer, record, say so
            traceback.print_exc(file=sys.stderr)
            if request.attempt is not None and request.attempt["outcome"] == "pending":
                self.state.journal.finish(request.attempt, "internal-error", 500, error=repr(exc))
            return Reply.json(500, error_body("fake_internal_error", f"{type(exc).__name__}: {exc}"))

    def effect(self, request: Request, raw_query: str) -> Reply:
        """Steps 2-7 of the module docstring for one request that may change the upstream."""
        journal, up = self.state.journal, self.upstream
        payload: dict[str, Any] = {"method": request.method, "path": request.route,
                                   "body": body_value(request.body, request.headers.get("content-type", ""))}
        if raw_query:
            payload["query"] = raw_query
        key = request.headers.get("idempotency-key")
        attempt = journal.begin(up.name, request.run_id, key, digest(payload), request.route, request.method)
        request.attempt = attempt

        def finish(outcome: str, reply: Reply, **extra: Any) -> Reply:
            journal.finish(attempt, outcome, None if reply.drop else reply.status, **extra)
            reply.attempt = attempt
            return reply

        info = {"service": up.name, "run_id": request.run_id, "key": key, "path": request.path,
                "payload_digest": attempt["payload_digest"], "headers": dict(request.headers),
                "order": attempt["order"], "peer": request.peer, "hung_up": request.hung_up}
        if request.headers.get("killpoint-step"):  # the request names its step (as for the fakes, effects.py)
            info["step"] = request.headers["killpoint-step"]
        decision = self.state.decide("effect.received", info)
        if decision.action == "drop":
            return finish("dropped", Reply.dropped())
        if decision.action != "go":
            status = 429 if decision.action == "overload" else 503
            return finish("injected-error", Reply.json(status, error_body(
                "service_unavailable", f"killpoint proxy {up.name}: injected {decision.action} before forwarding")))
        try:
            answer = forward(up, request.method, request.route, raw_query, request.headers, request.body,
                             self.timeout)
        except OSError as exc:
            return finish("upstream-error", upstream_failed(up, exc), error=str(exc))
        if not 200 <= answer.status < 300:
            return finish("rejected", answer.reply())
        response = {"status": answer.status, "body": body_value(answer.body, answer.content_type)}
        earlier = next((e for e in journal.effects_of(up.name, request.run_id)
                        if key is not None and e["key"] == key), None)
        given = answer_id(response, up.id_path)
        if earlier is not None and key is not None:
            if given == earlier["id"] or answer.header("idempotent-replayed") == "true":
                return finish("deduplicated", answer.reply(), effect_id=earlier["id"])
            if given is None:
                return finish("unproven", answer.reply(), effect_id=earlier["id"],
                              why=unproven_why(up, key, answer.status))

        def respond(seed: str) -> tuple[str, dict[str, Any]]:
            new_id = given or f"{up.name}_{digest({'service': up.name, 'run': request.run_id, 'seed': seed}, 20)}"
            return new_id, response

        _, effect = journal.apply(attempt, payload, False, respond)
        decision = self.state.decide("effect.applied", {**info, "effect_id": effect["id"]})
        if decision.action == "drop":
            return finish("dropped", Reply.dropped(), effect_id=effect["id"])
        if decision.action != "go":
            return finish("injected-error", Reply.json(500, error_body(
                "api_error", f"killpoint proxy {up.name}: injected {decision.action} after forwarding")),
                effect_id=effect["id"])
        return finish("applied", answer.reply(), effect_id=effect["id"])
