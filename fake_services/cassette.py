"""Recorded model answers (cassettes): a real model's answers, recorded once, replayed in every trial.

A cassette is a JSON Lines file, one recorded answer a line::

    {"api": "messages", "digest": "<64 hex>", "model": "claude-haiku-4-5",
     "text": "...", "calls": [{"id": "toolu_…", "name": "...", "arguments": {...}}],
     "stop_reason": "tool_use", "usage": {"input_tokens": 812, "output_tokens": 54}}

``digest`` names the request: the sha256 of its canonical JSON (``model.call_text``: model, system,
messages, and the tools, tool choice and output schema when it has any); ``api`` is the API that asked
(``messages``, ``chat.completions``, ``responses``). Nothing else of the request or the reply is written:
no header, so never an API key.

The fakes answer a request from the first of (``model.respond``): the script's pinned answer
(``script.py``), the cassette, the default policy (``policy.py``). The cassette's part, by mode:

1. the request's ``(api, digest)`` is in the cassette: its recorded answer (text, calls with their ids,
   usage, stop reason), whatever the mode;
2. else ``strict`` (the default): :class:`NotInCassette`, which the fake answers 400 naming the digest
   (``request <digest> is not in the cassette <path>``) and journals with ``cassette: "missing"``, so the
   crash-free failure and ``context_fidelity`` name the request;
3. else ``fallback``: None, the default policy answers;
4. else ``record``: the request is sent to the upstream (the real API) as the client sent it but without
   streaming, with the key of the process running the fakes (``ANTHROPIC_API_KEY`` / ``OPENAI_API_KEY``)
   or else the client's own; its answer is appended to the file and answered (streamed if the client
   asked). An upstream that fails or answers other than 2xx is :class:`UpstreamFailed`; nothing is
   recorded.

Where the fakes find one (:func:`from_environment`): ``KILLPOINT_MODEL_CASSETTE`` (the file),
``KILLPOINT_MODEL_CASSETTE_MODE`` (``strict``, ``fallback``, ``record``), ``KILLPOINT_MODEL_UPSTREAM`` (the
Anthropic API root, as the SDK's base URL: ``https://api.anthropic.com``) and
``KILLPOINT_OPENAI_UPSTREAM`` (``https://api.openai.com/v1``). ``killpoint record`` sets them.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .turns import Call, ToolCall, Turn

PATH_VAR = "KILLPOINT_MODEL_CASSETTE"
MODE_VAR = "KILLPOINT_MODEL_CASSETTE_MODE"
UPSTREAM_VARS = {"model": "KILLPOINT_MODEL_UPSTREAM", "openai": "KILLPOINT_OPENAI_UPSTREAM"}
"""The upstream of each model fake, by the fake's service name."""
MODES = ("strict", "fallback", "record")
API_PATHS = {"messages": "/v1/messages", "chat.completions": "/chat/completions", "responses": "/responses"}
"""Where each API lives under its upstream root (as the SDKs append it to their base URL)."""
SERVICE_OF = {"messages": "model", "chat.completions": "openai", "responses": "openai"}
KEY_VARS = {"model": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
FORWARDED = ("anthropic-version", "anthropic-beta", "openai-organization", "openai-project")
TIMEOUT_SECONDS = 120.0


class CassetteError(ValueError):
    """A cassette that cannot be read, or a bad mode or upstream."""


class NotAnswered(Exception):
    """The cassette cannot answer the request (:class:`NotInCassette`, :class:`UpstreamFailed`)."""


class NotInCassette(NotAnswered):
    """A strict cassette has no recording of the request."""


class UpstreamFailed(NotAnswered):
    """Recording: the upstream could not be reached or did not answer 2xx."""


@dataclass(frozen=True)
class Recorded:
    """One recorded answer: the turn (text and calls, with the real ids), its usage and stop reason."""

    turn: Turn
    input_tokens: int
    output_tokens: int
    stop_reason: str

    def line(self, api: str, digest: str, model: str) -> dict[str, Any]:
        return {"api": api, "digest": digest, "model": model, "text": self.turn.text,
                "calls": [c.as_json() for c in self.turn.calls], "stop_reason": self.stop_reason,
                "usage": {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens}}


def recorded_from(line: Mapping[str, Any]) -> Recorded:
    """A cassette line as a :class:`Recorded`; ``KeyError`` / ``TypeError`` if malformed."""
    calls = tuple(ToolCall(str(c["id"]), str(c["name"]), c["arguments"]) for c in line.get("calls") or [])
    usage = line.get("usage") or {}
    turn = Turn(str(line.get("text") or ""), calls)
    return Recorded(turn, int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0)),
                    str(line.get("stop_reason") or turn.stop_reason))


@dataclass
class Cassette:
    """A cassette file and its mode (module docstring); ``upstreams`` by fake service (``model``, ``openai``)."""

    path: Path
    mode: str = "strict"
    upstreams: Mapping[str, str] = field(default_factory=dict)
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    answers: dict[tuple[str, str], Recorded] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise CassetteError(f"cassette mode {self.mode!r}: expected one of {', '.join(MODES)}")
        if self.mode == "record" and not self.upstreams:
            raise CassetteError(f"recording a cassette needs an upstream: set {' or '.join(UPSTREAM_VARS.values())}")
        self.answers = self.answers or read(self.path, must_exist=self.mode != "record")

    def answer(self, call: Call, digest: str, headers: Mapping[str, str]) -> Recorded | None:
        """The cassette's answer to ``call`` (whose request digest is ``digest``), by the module docstring's
        steps; ``headers`` are the client's (record mode forwards some). None: the default policy answers."""
        found = self.answers.get((call.api, digest))
        if found is not None:
            return found
        if self.mode == "strict":
            raise NotInCassette(f"request {digest[:16]} ({call.api}, model {call.model}) is not in the cassette "
                                f"{self.path}: record it with killpoint record, or replay with mode fallback")
        if self.mode == "fallback":
            return None
        recorded = self.record(call, headers)
        with self._lock:
            if (call.api, digest) not in self.answers:
                self.answers[(call.api, digest)] = recorded
                with self.path.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(recorded.line(call.api, digest, call.model), ensure_ascii=False) + "\n")
        return self.answers[(call.api, digest)]

    def record(self, call: Call, headers: Mapping[str, str]) -> Recorded:
        """Step 4: the upstream's answer to ``call``, asked without streaming."""
        service = SERVICE_OF[call.api]
        root = self.upstreams.get(service)
        if not root:
            raise UpstreamFailed(f"no upstream to record {call.api} requests from: set {UPSTREAM_VARS[service]}")
        body = {k: v for k, v in call.body.items() if k not in ("stream", "stream_options")}
        request = urllib.request.Request(root.rstrip("/") + API_PATHS[call.api], method="POST",
                                         data=json.dumps(body).encode("utf-8"),
                                         headers={"content-type": "application/json",
                                                  **upstream_auth(service, headers, self.environ),
                                                  **{k: headers[k] for k in FORWARDED if k in headers}})
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:  # noqa: S310 - the user's URL
                reply = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise UpstreamFailed(f"the upstream {root} answered {exc.code} to request {call.api}: "
                                 f"{exc.read()[:300].decode('utf-8', 'replace')}") from None
        except (OSError, ValueError) as exc:
            raise UpstreamFailed(f"the upstream {root} could not be asked: {exc}") from None
        try:
            return PARSERS[call.api](reply)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise UpstreamFailed(f"the upstream {root} answered something that is not a {call.api} answer: "
                                 f"{exc!r}") from None


def upstream_auth(service: str, headers: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """The credentials to send upstream, as the API takes them (Anthropic ``x-api-key``, OpenAI ``Authorization:
    Bearer``): the fakes' process's key for the API, else the client's own (from either header)."""
    bearer = headers.get("authorization", "")
    key = environ.get(KEY_VARS[service], "") or headers.get("x-api-key", "") or bearer.removeprefix("Bearer ")
    if not key:
        return {}
    return {"x-api-key": key} if service == "model" else {"authorization": f"Bearer {key}"}


def read(path: Path, must_exist: bool = True) -> dict[tuple[str, str], Recorded]:
    """The answers in the cassette at ``path`` (none if it does not exist and need not);
    ``CassetteError`` naming the line that cannot be read."""
    if not path.exists():
        if must_exist:
            raise CassetteError(f"no cassette at {path}")
        return {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise CassetteError(f"{path} cannot be read ({exc.__class__.__name__}: {exc})") from None
    answers: dict[tuple[str, str], Recorded] = {}
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            line = json.loads(text)
        except ValueError as exc:
            raise CassetteError(f"{path}:{number}: not JSON ({exc})") from None
        try:
            if not isinstance(line, dict):
                raise TypeError(f"a JSON {type(line).__name__}, not an object")
            answers[(str(line["api"]), str(line["digest"]))] = recorded_from(line)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CassetteError(f"{path}:{number}: not a cassette line ({exc.__class__.__name__}: {exc}); "
                                "each line is an object with api, digest, text, calls, usage") from None
    return answers


def messages_answer(reply: Mapping[str, Any]) -> Recorded:
    """An Anthropic Messages answer as recorded."""
    blocks = reply["content"]
    text = "".join(b["text"] for b in blocks if b.get("type") == "text")
    calls = tuple(ToolCall(b["id"], b["name"], b.get("input") or {}) for b in blocks if b.get("type") == "tool_use")
    usage = reply.get("usage") or {}
    return Recorded(Turn(text, calls), int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0)),
                    str(reply.get("stop_reason") or Turn(text, calls).stop_reason))


def chat_answer(reply: Mapping[str, Any]) -> Recorded:
    """An OpenAI Chat Completions answer (its first choice) as recorded."""
    choice = reply["choices"][0]
    message = choice["message"]
    calls = tuple(ToolCall(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"] or "{}"))
                  for c in message.get("tool_calls") or [])
    usage = reply.get("usage") or {}
    turn = Turn(message.get("content") or "", calls)
    stop = "max_tokens" if choice.get("finish_reason") == "length" else turn.stop_reason
    return Recorded(turn, int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)), stop)


def responses_answer(reply: Mapping[str, Any]) -> Recorded:
    """An OpenAI Responses answer as recorded."""
    items = reply["output"]
    text = "".join(part.get("text", "") for item in items if item.get("type") == "message"
                   for part in item.get("content") or [] if part.get("type") == "output_text")
    calls = tuple(ToolCall(i["call_id"], i["name"], json.loads(i.get("arguments") or "{}"))
                  for i in items if i.get("type") == "function_call")
    usage = reply.get("usage") or {}
    turn = Turn(text, calls)
    stop = "max_tokens" if reply.get("status") == "incomplete" else turn.stop_reason
    return Recorded(turn, int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0)), stop)


PARSERS = {"messages": messages_answer, "chat.completions": chat_answer, "responses": responses_answer}


def from_environment(environ: Mapping[str, str] | None = None) -> Cassette | None:
    """The cassette the environment names (module docstring), or None; ``CassetteError`` if unreadable."""
    env = os.environ if environ is None else environ
    path = env.get(PATH_VAR, "")
    if not path:
        return None
    upstreams = {service: env[var] for service, var in UPSTREAM_VARS.items() if env.get(var)}
    return Cassette(Path(path), env.get(MODE_VAR) or "strict", upstreams, env)
