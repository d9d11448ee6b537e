"""Corpus: a step visited more than once. The invoice is charged in two installments: `charge` runs twice
(the cursor comes back to it), each pass keyed `<run>:charge:<n>` (n the installment), so each installment
is charged once whatever the faults. Correct: killpoint must judge each pass of the loop as a visit of its
own (a replay of one pass is not the next pass)."""

from __future__ import annotations

from collections.abc import Callable

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from killpoint.reference_agent.invoice_agent import MIGRATIONS, OWN_EFFECTS_SQL, START, STATE_VERSION
from killpoint.reference_agent.invoice_agent import STEPS as _STEPS
from killpoint.reference_agent.invoice_agent import initial_state as _initial

INSTALLMENTS = 2
Step = Callable[[Checkpoint, StepContext], StepResult]


def initial_state(params: dict) -> dict:
    return {**_initial(params), "paid": []}


def installment_key(ctx: StepContext, n: int, part: int) -> str:
    """The key of installment `n` (of `part` cents): the step's key and the installment, stable across replays."""
    return f"{ctx.idempotency_key}:{n}"


def charging(key: Callable[[StepContext, int, int], str]) -> Step:
    """The `charge` step, one installment per visit, each keyed by `key(ctx, n, part)`."""
    def charge(cp: Checkpoint, ctx: StepContext) -> StepResult:
        s = cp.state
        if "validate" not in s["approvals"]:
            return StepResult("validate")
        n = len(s["paid"]) + 1
        part = s["amount_cents"] // INSTALLMENTS
        receipt = ctx.ledger.charge(s["customer"]["account"], part, s["currency"], key=key(ctx, n, part))
        paid = [*s["paid"], receipt.get("id")]
        return StepResult("charge" if len(paid) < INSTALLMENTS else "email", {"paid": paid, "charge_id": paid[0]})
    return charge


STEPS = {**_STEPS, "charge": charging(installment_key)}

__all__ = ["MIGRATIONS", "OWN_EFFECTS_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]
