"""Evidence: everything a checker may look at for one run, gathered after the run ended."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

RUN_PLACEHOLDER = "<run>"
MIN_ALIAS = 6
"""Shorter keys and ids are not aliased: replacing them inside other text would do harm."""


@dataclass
class Evidence:
    """The recorded facts of one run (faulted or baseline). Checkers are pure functions of these.

    `final` is the final checkpoint payload (None: no checkpoint), `final_raw` its stored text;
    `audit` the checkpoint writes in commit order (seq, cursor, status, app = incarnation id);
    `attempts`/`effects`/`model_requests` the fake services' records; `own_effects` rows of the agent's
    own-database effects; `incarnations` one dict per worker process (inc, role, pid, exit_code,
    signal); `limit` the liveness bound that stopped the run, if any; `leftovers` processes found alive
    after the run; `options` the knobs the run used (grace, drain expectations...).
    """

    run_id: str
    events: list[dict] = field(default_factory=list)
    final: dict | None = None
    final_raw: str | None = None
    audit: list[dict] = field(default_factory=list)
    attempts: list[dict] = field(default_factory=list)
    effects: list[dict] = field(default_factory=list)
    model_requests: list[dict] = field(default_factory=list)
    own_effects: list[Any] = field(default_factory=list)
    incarnations: list[dict] = field(default_factory=list)
    limit: str | None = None
    leftovers: list[str] = field(default_factory=list)
    options: dict = field(default_factory=dict)

    def faults(self) -> list[dict]:
        return [e for e in self.events if e["type"] == "fault"]

    @cached_property
    def aliases(self) -> dict[str, str]:
        """Run-specific names and their placeholders, longest first: each idempotency key and each
        effect id, named by service and order of first appearance (so an agent's own key scheme, a
        uuid or a digest, compares across runs), and the run id."""
        out: dict[str, str] = {}
        keys: dict[str, int] = {}
        effects: dict[str, int] = {}
        for e in self.effects:
            service = str(e.get("service"))
            key = e.get("key")
            if isinstance(key, str) and len(key) >= MIN_ALIAS and key not in out:
                keys[service] = keys.get(service, 0) + 1
                out[key] = f"<{service}-key{keys[service]}>"
            effects[service] = effects.get(service, 0) + 1
            if e.get("id") and len(str(e["id"])) >= MIN_ALIAS:
                out[str(e["id"])] = f"<{service}-effect{effects[service]}>"
        out[self.run_id] = RUN_PLACEHOLDER
        return dict(sorted(out.items(), key=lambda kv: -len(kv[0])))

    def normalize(self, value: Any) -> Any:
        """`value` with run-specific names replaced by placeholders, so two runs compare."""
        return normalize(value, self.aliases)


def normalize(value: Any, aliases: dict[str, str]) -> Any:
    if isinstance(value, str):
        for old, new in aliases.items():
            value = value.replace(old, new)
        return value
    if isinstance(value, dict):
        return {normalize(k, aliases): normalize(v, aliases) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(normalize(v, aliases) for v in value)
    return value
