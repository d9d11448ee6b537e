"""context_fidelity: a resumed agent sends the model the context the crash-free run sent, tool results too.

A model request's identity is its model, system, messages and the tools it offered (by name), with
run-specific names replaced (`Evidence.normalize`), text that reads as a timestamp replaced
(`evidence.unstamped`: a prompt that names the current time is asked again in another second on replay), and
the crash-free run's volatile `model.` fields left out (they differed between the two crash-free runs, or the
step module declared them in `NONDETERMINISTIC`, e.g. `model.messages.0.content`). The conversation's tool traffic is read from the
messages whatever the API (`tool_traffic`): Anthropic `tool_use` / `tool_result` blocks, Chat Completions
`tool_calls` / `tool` messages, Responses `function_call` / `function_call_output` items.

1. A request a strict cassette had no recording of (the fake journaled `cassette: missing`) fails, named by
   its digest: the fake could not answer it as the real model did.
2. Every other request must equal one the crash-free run sent. Each one that does not is explained where
   the tool traffic says why:
   - a tool result lost: the request carries a tool call whose result is not in it though the
     conversation went on past it, and the crash-free run sent that result;
   - a tool call resent: the same call (by id) is made twice in the conversation, or made again after its
     result came back: the agent ran a tool whose effect had already happened.
   Otherwise the request is described by its length and last message, with the crash-free lengths.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from killpoint.checkers.evidence import Evidence, not_compared, request_body
from killpoint.checkers.verdict import Verdict, failed, not_applicable, passed, unknown

SHOWN = 3
"""Requests a failure describes."""


@dataclass
class ToolTraffic:
    """The tool calls and results of one request's conversation, in order: `calls` (id, name) as the model
    made them, `results` the ids answered, `after` the ids of calls followed by more conversation (another
    message after the one holding the call), `resent` the ids of calls made again (twice, or after their
    result)."""

    calls: list[tuple[str, str]] = field(default_factory=list)
    results: set[str] = field(default_factory=set)
    after: set[str] = field(default_factory=set)
    resent: list[tuple[str, str]] = field(default_factory=list)

    def call(self, call_id: str, name: str) -> None:
        if call_id in self.results or any(call_id == c for c, _ in self.calls):
            self.resent.append((call_id, name))
        self.calls.append((call_id, name))

    def unanswered(self) -> list[tuple[str, str]]:
        """Calls with no result though the conversation went on past them."""
        return [(c, n) for c, n in self.calls if c not in self.results and c in self.after]


def _blocks(content: Any) -> list[dict]:
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _message_items(message: dict) -> Iterable[tuple[str, str, str]]:
    """("call" | "result", id, name) for each tool call or result in one message or Responses item."""
    kind = message.get("type")
    if kind == "function_call":
        yield "call", str(message.get("call_id")), str(message.get("name"))
    elif kind == "function_call_output":
        yield "result", str(message.get("call_id")), ""
    if message.get("role") == "tool":
        yield "result", str(message.get("tool_call_id")), ""
    for c in message.get("tool_calls") or []:
        if isinstance(c, dict):
            yield "call", str(c.get("id")), str((c.get("function") or {}).get("name"))
    for b in _blocks(message.get("content")):
        if b.get("type") == "tool_use":
            yield "call", str(b.get("id")), str(b.get("name"))
        elif b.get("type") == "tool_result":
            yield "result", str(b.get("tool_use_id")), ""


def tool_traffic(messages: Any) -> ToolTraffic:
    """The tool traffic of a request's messages (any of the three APIs' shapes; other shapes are none)."""
    traffic = ToolTraffic()
    seen: list[str] = []
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            continue
        traffic.after.update(seen)
        seen = []
        for what, call_id, name in _message_items(message):
            if what == "call":
                traffic.call(call_id, name)
                seen.append(call_id)
            else:
                traffic.results.add(call_id)
    return traffic


def identity(ev: Evidence, r: dict, volatile: frozenset[str] = frozenset()) -> str:
    """What names a request across runs: model, system, messages and the tools offered, normalized, with
    timestamps and the `volatile` `model.` fields left out (`evidence.request_body`)."""
    return json.dumps(request_body(ev, r, volatile), sort_keys=True)


def explain(ev: Evidence, r: dict, answered: set[str]) -> list[str]:
    """Step 2's lines for one strange request: lost results and resent calls, else its shape."""
    traffic = tool_traffic(ev.normalize(r.get("messages") or []))
    lines = [f"request #{r.get('order')} lost the tool result of {name} ({call_id}): the crash-free run sent it"
             for call_id, name in traffic.unanswered() if call_id in answered]
    lines += [f"request #{r.get('order')} resends the tool call {name} ({call_id}) after its effect: the call "
              f"was already made in this conversation" for call_id, name in traffic.resent]
    if lines:
        return lines
    msgs = ev.normalize(r.get("messages") or [])
    return [f"request #{r.get('order')} with {len(msgs)} messages, last: {json.dumps(msgs[-1:])[:100]}"]


def context_fidelity(ev: Evidence, base: Evidence | None) -> Verdict:
    """Every model request equals one the crash-free run sent: a resumed step sees the context it saw,
    its tool results included (module docstring)."""
    missing = [r for r in ev.model_requests if r.get("cassette") == "missing"]
    if missing:
        return failed("context_fidelity", f"request {missing[0].get('request_digest')} is not in the cassette",
                      [str(r.get("error") or f"request {r.get('request_digest')} is not in the cassette")
                       for r in missing[:SHOWN]])
    if base is None:
        return unknown("context_fidelity", "no crash-free baseline to compare with")
    if not base.model_requests and not ev.model_requests:
        return not_applicable("context_fidelity", "the agent makes no model requests")
    volatile = base.volatile
    known = {identity(base, r, volatile): r for r in base.model_requests}  # none: any request is one never sent
    strange = [r for r in ev.model_requests if identity(ev, r, volatile) not in known]
    if not strange:
        return passed("context_fidelity", f"{len(ev.model_requests)} model requests, all as in the crash-free run"
                      + not_compared(volatile, "model"))
    answered = {c for r in base.model_requests for c in tool_traffic(base.normalize(r.get("messages") or [])).results}
    lines = [line for r in strange[:SHOWN] for line in explain(ev, r, answered)]
    lost = any("lost the tool result" in line for line in lines)
    resent = any("resends the tool call" in line for line in lines)
    why = " (a tool result lost)" if lost else " (a tool call resent after its effect)" if resent else ""
    nearest = sorted(len(r.get("messages") or []) for r in known.values())
    lines.append(f"crash-free requests had {nearest} messages")
    return failed("context_fidelity", f"{len(strange)} model request(s) the crash-free run never sent{why}", lines)
