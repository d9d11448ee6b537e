"""Contract violation: a MODEL_SCRIPT that is no script (a number). The reference agent's steps otherwise: the
fakes are started before the step module is loaded (run.opening), so the script is refused after them."""

from killpoint.reference_agent.invoice_agent import (
    MIGRATIONS,
    OWN_EFFECTS_SQL,
    START,
    STATE_VERSION,
    STEPS,
    initial_state,
)

__all__ = ["MIGRATIONS", "MODEL_SCRIPT", "OWN_EFFECTS_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]

MODEL_SCRIPT = 42
