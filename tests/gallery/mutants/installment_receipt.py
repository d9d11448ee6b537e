"""Mutant: a later pass of a loop does an effect the first pass does not, unprotected. The invoice is charged
in two installments (the loop of tests.corpus.installments, each charge keyed `<run>:charge:<n>`); from the
second on, `charge` also mails a receipt for the installment under a fresh key (`uuid4`), so a kill after
that receipt and before the pass's checkpoint mails it again. No fault in the first pass can show it (it
mails nothing), and a kill between passes lets the successor run the second pass whole: only a fault in the
second visit of `charge` (`@2`) does."""

from __future__ import annotations

import uuid

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from tests.corpus.installments import (
    MIGRATIONS,
    OWN_EFFECTS_SQL,
    START,
    STATE_VERSION,
    charging,
    initial_state,
    installment_key,
)
from tests.corpus.installments import STEPS as _STEPS

_charge = charging(installment_key)


def charge(cp: Checkpoint, ctx: StepContext) -> StepResult:
    result = _charge(cp, ctx)
    paid = result.state.get("paid", [])
    if len(paid) >= 2:
        s = cp.state
        ctx.mailer.send(s["customer"]["email"], "installment-receipt", {"installment": len(paid), "charge": paid[-1]},
                        key=str(uuid.uuid4()))  # BUG: a fresh key on every attempt
    return result


STEPS = {**_STEPS, "charge": charge}

__all__ = ["MIGRATIONS", "OWN_EFFECTS_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]
