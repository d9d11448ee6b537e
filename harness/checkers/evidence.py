"""Evidence: everything a checker may look at for one run, gathered after the run ended."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

RUN_PLACEHOLDER = "<run>"


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

    def aliases(self) -> dict[str, str]:
        """Run-specific names and their placeholders: the run id, and each effect's id (a charge id
        derives from the run's idempotency key) named by its service and run-free key."""
        out = {self.run_id: RUN_PLACEHOLDER}
        keyless: dict[str, int] = {}
        for e in self.effects:
            service = str(e.get("service"))
            if e.get("key") is None:
                keyless[service] = keyless.get(service, 0) + 1
            key = str(e.get("key") or f"#{keyless.get(service)}").replace(self.run_id, RUN_PLACEHOLDER)
            if e.get("id"):
                out[str(e["id"])] = f"<{service}:{key}>"
        return out

    def normalize(self, value: Any) -> Any:
        """`value` with run-specific names replaced by placeholders, so two runs compare."""
        return normalize(value, self.aliases())


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
