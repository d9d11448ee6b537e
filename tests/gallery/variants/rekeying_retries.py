"""The invoice agent whose ledger client mints a new idempotency key for each retry (flaky-services): a
charge whose answer was lost (connection dropped after the ledger applied it) is retried under a key the
ledger has never seen, and charged again."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from killpoint.reference_agent import invoice_agent
from killpoint.reference_agent.clients import Ledger
from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, initial_state
from killpoint.reference_agent.runtime import Checkpoint, StepContext, StepResult

__all__ = ["MIGRATIONS", "START", "STATE_VERSION", "STEPS", "initial_state"]


class _RekeyingHttp:
    """Posts through `http`, with the N-th attempt's Idempotency-Key suffixed `#N` (the first is unchanged)."""

    def __init__(self, http: Any) -> None:
        self.http = http
        self.attempts = 0

    def post(self, url: str, json: Any, headers: dict[str, str]) -> Any:
        self.attempts += 1
        if self.attempts > 1 and "Idempotency-Key" in headers:  # BUG: a retry is a new request to the ledger
            headers = {**headers, "Idempotency-Key": f"{headers['Idempotency-Key']}#{self.attempts}"}
        return self.http.post(url, json=json, headers=headers)


def charge(cp: Checkpoint, ctx: StepContext) -> StepResult:
    ledger = Ledger(_RekeyingHttp(ctx.ledger.http), ctx.ledger.base_url, ctx.ledger.responded, ctx.ledger.retry)
    return invoice_agent.charge(cp, replace(ctx, ledger=ledger))


STEPS = {**invoice_agent.STEPS, "charge": charge}
