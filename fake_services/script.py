"""Scripted answers: a user pins the model answers that matter; the rest is the default policy.

One format for every API the fakes serve (Anthropic Messages, OpenAI Chat Completions and Responses).
A script is any of:

- a **table**: a list of rules, or ``{"rules": [...], "rounds": N, "calls": N}`` (``rounds`` and ``calls``
  tune the default policy, ``policy.Settings``). A rule is ``{"when": {...}, "then": [answer, ...]}``:
  ``when`` holds conditions that must all hold (``tool``: a tool of that name is offered; ``text``: the
  last user message contains this text; ``model``; ``api``: ``messages``, ``chat.completions`` or
  ``responses``); ``then`` lists the answers for the model's turns after the last user message: the
  first answers it, the second answers once the first turn's tool results come back, and so on (a
  single answer needs no list). Past the end of ``then``, the next rule or the default policy answers.
- a **function** ``request -> answer or None`` (None: the table or default policy answers). ``request``
  is a ``turns.Call``: ``api``, ``model``, ``system``, ``messages``, ``tool_names``, ``tools``,
  ``choice``, ``output``, ``dialogue.user_text``, ``dialogue.rounds``, ``dialogue.results`` (the tool
  results just sent back: ``call_id``, ``name``, ``content``).
- ``{"function": f, "rules": [...], ...}``: both, the function asked first.

An answer is ``{"say": "text"}`` (or a bare string), ``{"json": value}`` (structured output, sent as JSON
text), ``{"call": "tool", "arguments": {...}}`` (arguments left out: generated from the tool's schema) or
``{"calls": [{"call": "tool", "arguments": {...}}, ...]}`` (parallel calls). A scripted call is made even
when the request's tool choice would not allow it: the script is the user's word.

Where the fakes find it (:func:`load_script`): a Python value (a step module's ``MODEL_SCRIPT``), or a
path to a ``.json`` / ``.toml`` table or a ``.py`` file defining ``MODEL_SCRIPT``, or a module name
(``pkg.mod`` or ``pkg.mod:NAME``); ``KILLPOINT_MODEL_SCRIPT`` in the environment names one for fakes
started without a script (:func:`from_environment`).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .policy import Settings, default_turn
from .schema_values import value_for
from .turns import Call, ToolCall, Turn, call_id

ENV_VAR = "KILLPOINT_MODEL_SCRIPT"
ATTRIBUTE = "MODEL_SCRIPT"
CONDITIONS = ("tool", "text", "model", "api")
ANSWER_KEYS = ("say", "json", "call", "calls")


class ScriptError(ValueError):
    """A script that cannot be read, or an answer that is not one of the documented shapes."""


@dataclass(frozen=True)
class Rule:
    """``when`` (conditions, all must hold) -> ``then`` (the answers, by tool round)."""

    when: Mapping[str, str]
    then: tuple[Any, ...]

    def matches(self, call: Call) -> bool:
        checks = {"tool": lambda v: v in call.tool_names, "text": lambda v: v in call.dialogue.user_text,
                  "model": lambda v: v == call.model, "api": lambda v: v == call.api}
        return all(checks[key](value) for key, value in self.when.items())


@dataclass(frozen=True)
class Script:
    """A loaded script (see the module docstring); ``Script()`` is the default policy alone."""

    rules: tuple[Rule, ...] = ()
    function: Callable[[Call], Any] | None = None
    settings: Settings = field(default_factory=Settings)

    def turn(self, call: Call, digest: str, prefix: str) -> Turn:
        """The answer to ``call``: :meth:`pinned`, else the default policy's."""
        pinned = self.pinned(call, digest, prefix)
        return self.default(call, digest, prefix) if pinned is None else pinned

    def default(self, call: Call, digest: str, prefix: str) -> Turn:
        """The default policy's answer to ``call``, with this script's settings."""
        return default_turn(call, digest, self.settings, prefix)

    def pinned(self, call: Call, digest: str, prefix: str) -> Turn | None:
        """The answer the script pins for ``call``: the function's, else the first matching rule's answer
        for this round, else None. Call ids are ``prefix`` + digest-derived characters, as the policy's.
        ``ScriptError`` when the function raises or an answer is not one of the documented shapes."""
        if self.function is not None:
            try:
                chosen = self.function(call)
            except Exception as exc:  # the user's code: its failure is the request's answer, not the server's
                raise ScriptError(f"the model script function raised {exc!r}") from exc
            if chosen is not None:
                return to_turn(chosen, call, digest, prefix)
        for rule in self.rules:
            if rule.matches(call) and call.dialogue.rounds < len(rule.then):
                return to_turn(rule.then[call.dialogue.rounds], call, digest, prefix)
        return None


def to_turn(answer: Any, call: Call, digest: str, prefix: str) -> Turn:
    """A scripted answer (one of the documented shapes, or a ``Turn``) as a turn; ``ScriptError`` otherwise."""
    if isinstance(answer, Turn):
        return answer
    if isinstance(answer, str):
        return Turn(answer)
    check_answer(answer)
    if "say" in answer:
        return Turn(str(answer["say"]))
    if "json" in answer:
        return Turn(json.dumps(answer["json"], ensure_ascii=False))
    wanted = answer["calls"] if "calls" in answer else [answer]
    calls = []
    for i, one in enumerate(wanted):
        name = one.get("call", one.get("name"))
        arguments = one.get("arguments")
        if arguments is None:
            tool = call.tool(name)
            arguments = value_for(tool.schema, f"{digest}:{i}") if tool is not None else {}
        calls.append(ToolCall(call_id(prefix, digest, i), name, arguments))
    return Turn(str(answer.get("say", "")), tuple(calls))


def check_answer(answer: Any) -> None:
    """``ScriptError`` unless ``answer`` is one of the documented answer shapes."""
    if not isinstance(answer, Mapping) or not any(k in answer for k in ANSWER_KEYS):
        raise ScriptError(f"a model script answer must be a string or hold one of {', '.join(ANSWER_KEYS)}; "
                          f"got {answer!r}")
    calls = answer["calls"] if "calls" in answer else [answer] if "call" in answer else []
    if "calls" in answer and (not isinstance(calls, list) or not calls):
        raise ScriptError(f"'calls' must be a non-empty list of {{'call': NAME, 'arguments': {{...}}}}; got {calls!r}")
    for one in calls:
        if not isinstance(one, Mapping) or not isinstance(one.get("call", one.get("name")), str):
            raise ScriptError(f"a scripted call needs 'call': the tool's name; got {one!r}")
        if one.get("arguments") is not None and not isinstance(one["arguments"], Mapping):
            raise ScriptError(f"a scripted call's 'arguments' must be an object; got {one['arguments']!r}")


def rule_from(raw: Any) -> Rule:
    if not isinstance(raw, Mapping):
        raise ScriptError(f"a model script rule must be an object with 'when' and 'then'; got {raw!r}")
    when = raw.get("when") or {}
    if not isinstance(when, Mapping) or set(when) - set(CONDITIONS):
        raise ScriptError(f"a rule's 'when' may hold {', '.join(CONDITIONS)}; got {when!r}")
    then = raw.get("then", {k: raw[k] for k in ANSWER_KEYS + ("arguments",) if k in raw} or None)
    answers = tuple(then) if isinstance(then, list) else (then,)
    for answer in answers:
        if not isinstance(answer, str):
            check_answer(answer)
    return Rule({k: str(v) for k, v in when.items()}, answers)


def script_from(value: Any) -> Script:
    """A script from a Python value: a ``Script``, a function, a list of rules or a table object."""
    if value is None:
        return Script()
    if isinstance(value, Script):
        return value
    if callable(value):
        return Script(function=value)
    if isinstance(value, list):
        return Script(rules=tuple(rule_from(r) for r in value))
    if isinstance(value, Mapping):
        unknown = set(value) - {"rules", "rounds", "calls", "function"}
        if unknown:
            raise ScriptError(f"a model script table may hold rules, rounds, calls, function; got {sorted(unknown)}")
        function = value.get("function")
        if function is not None and not callable(function):
            raise ScriptError(f"'function' must be callable; got {function!r}")
        try:
            settings = Settings(int(value.get("rounds", 1)), int(value.get("calls", 1)))
        except ValueError as exc:
            raise ScriptError(f"model script: {exc}") from None
        return Script(tuple(rule_from(r) for r in value.get("rules") or []), function, settings)
    raise ScriptError(f"a model script is a function, a list of rules or a table; got {type(value).__name__}")


def load_script(source: Any) -> Script:
    """A script from a Python value (:func:`script_from`), or from a path or module name (a string or
    ``Path``: ``.json``, ``.toml``, ``.py``, ``pkg.mod``, ``pkg.mod:NAME``); ``ScriptError`` if unreadable."""
    if not isinstance(source, str | Path):
        return script_from(source)
    text = str(source)
    path = Path(text)
    try:
        if path.suffix == ".json":
            return script_from(json.loads(path.read_text(encoding="utf-8")))
        if path.suffix == ".toml":
            return script_from(tomllib.loads(path.read_text(encoding="utf-8")))
        if path.suffix == ".py":
            spec = importlib.util.spec_from_file_location(f"killpoint_model_script_{path.stem}", path)
            if spec is None or spec.loader is None:
                raise ScriptError(f"cannot import {path}")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return script_from(_attribute(module, ATTRIBUTE, text))
        name, _, attribute = text.partition(":")
        return script_from(_attribute(importlib.import_module(name), attribute or ATTRIBUTE, text))
    except (OSError, ImportError, json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ScriptError(f"cannot read the model script {text}: {exc}") from None


def _attribute(module: Any, name: str, source: str) -> Any:
    if not hasattr(module, name):
        raise ScriptError(f"the model script {source} defines no {name}")
    return getattr(module, name)


def from_environment(environ: Mapping[str, str] | None = None) -> Script:
    """The script ``KILLPOINT_MODEL_SCRIPT`` names, or the default policy alone when it is unset or empty."""
    source = (os.environ if environ is None else environ).get(ENV_VAR, "")
    return load_script(source) if source else Script()
