"""The invoice agent on a worker that swallows SIGTERM (deploy-drain): its handler does nothing, so the
worker neither yields at the next step boundary nor gives up at its drain deadline. It works on until
the run is done, taking new steps after the signal, or until the grace period ends in SIGKILL."""

from __future__ import annotations

from types import FrameType

from killpoint.reference_agent import worker
from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, STEPS, initial_state
from tests.gallery.variants.patching import in_worker

__all__ = ["MIGRATIONS", "START", "STATE_VERSION", "STEPS", "initial_state"]


def _ignore(self: object, signum: int, frame: FrameType | None) -> None:
    """BUG: the SIGTERM handler neither sets the drain flag nor arms the deadline."""


if in_worker():  # never patch the harness process that loads this module to check it
    worker._Shutdown.handle = _ignore  # type: ignore[method-assign]
