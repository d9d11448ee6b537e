"""What the servers of one process share: the journal, the static faults, the hook, the model script and
the model cassette."""

from __future__ import annotations

import time
from typing import Any

from . import cassette as cassettes
from .cassette import Cassette
from .faults import Faults
from .hooks import Decision, Hook
from .journal import Journal
from .sampling import Sampling
from .script import Script, from_environment


class State:
    """Shared by every server started together, so one arrival counter orders all services."""

    def __init__(self, hook: Hook | None = None, script: Script | None = None,
                 cassette: Cassette | None = None) -> None:
        self.journal = Journal()
        self.faults = Faults()
        self.hook: Hook | None = hook
        self.script: Script = from_environment() if script is None else script
        """How the model fakes answer (``script.py``): by default the script ``KILLPOINT_MODEL_SCRIPT`` names,
        else the default policy alone."""
        self.sampling = Sampling()
        """The runs whose model samples, and pinned answers (``sampling.py``); none by default."""
        self.cassette: Cassette | None = cassettes.from_environment() if cassette is None else cassette
        """The recorded answers the model fakes replay (``cassette.py``) after the script's, before the default
        policy's: by default the cassette ``KILLPOINT_MODEL_CASSETTE`` names, else none."""

    def decide(self, point: str, info: dict[str, Any]) -> Decision:
        """Ask the hook (which may block), then the static faults; sleep any delay; return the action.

        The result's action is one of go | error | drop | overload (``slow`` has been slept and is
        ``go``). A hook that raises or returns something else than a Decision propagates an exception.
        """
        decision = Decision.GO
        hook = self.hook
        if hook is not None:
            answer = hook(point, info)
            if answer is not None:
                if not isinstance(answer, Decision):
                    raise TypeError(f"hook returned {answer!r} at {point}; expected a Decision or None")
                decision = answer
        delay = decision.delay_ms
        action = decision.action
        if action in ("go", "slow"):
            static = self.faults.take(info["service"], point)
            delay += static.delay_ms
            action = static.action
        if delay:
            time.sleep(delay / 1000)
        return Decision.GO if action in ("go", "slow") else Decision(action)
