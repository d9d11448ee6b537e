"""What a scenario gets from the command that runs it (`Context`): the session, the user's choices (seed,
budget, named scenarios, actions, shard), and where to say how it goes."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from killpoint.faults.shard import Shard

if TYPE_CHECKING:
    from killpoint.run.checkpoint_store import CheckpointStore
    from killpoint.run.trial import Session


@dataclass
class Context:
    """What a scenario gets: the session, the base seed, a time budget for random exploration, and a
    way to report progress."""

    session: Session
    seed: int = 0
    budget: float = 60.0
    say: Callable[[str], None] = lambda _msg: None
    random_count: int = 8
    started: float = field(default_factory=time.monotonic)
    previous_steps: str | None = None
    """The agent's previous code (`--previous-steps pkg.module`), for the schema scenarios."""
    explicit: bool = False
    """The user wrote the schedules (`replay --schedule`): a fault that never fires leaves a trial unknown."""
    named: tuple[str, ...] = ()
    """The scenarios the user named (`--scenario`); empty when the whole suite runs."""
    actions: tuple[str, ...] = ()
    """The fault actions the user allowed (`--actions kill,term`); empty: every scenario's own."""
    shard: Shard | None = None
    """`--shard K/N`: only the schedules of this shard run (`faults.shard`); None: all of them."""
    on_trial: Callable[[str, int, int, str], None] | None = None
    """Called after each trial of a plan as (scenario, done, total, outcome): the progress display."""
    checkpoints: CheckpointStore | None = None
    """The checkpoints kept by earlier runs (`run.checkpoint_store`), for `stored-checkpoints`; None: off."""
    judged: frozenset[str] = frozenset()
    """Schedules (as text) the scenario judged already in this session, before its plans: the stored failures
    replayed first (`run.store.replay`). A scenario whose trial is a function of its schedule
    (`Scenario.judged_once`) does not run them again in its plans (`run.plans.run_plan`)."""

    def asked(self, name: str) -> bool:
        """True when the user named scenario `name` (not merely ran the whole suite)."""
        return name in self.named

    share: Callable[[], float] | None = None
    """When the scenario runs beside others (`run.side_by_side`): its share of the session's time so far
    (`run.gate.Gate.share`), in which its budget is measured instead of the wall clock since `started`:
    sharing the machine leaves it the random exploration it would have had alone. None: the wall clock."""

    def slot(self, owner: str) -> contextlib.AbstractContextManager[None]:
        """A slot of the session's gate for one trial of `owner` (`run.gate`); none to wait for without a
        session (a plan dealt or counted on its own, as the shard tests do)."""
        return self.session.gate.slot(owner) if self.session is not None else contextlib.nullcontext()

    def spent(self) -> float:
        """The seconds of its budget the scenario has spent (`share`, else the wall clock since `started`)."""
        return self.share() if self.share is not None else time.monotonic() - self.started

    def over_budget(self) -> bool:
        return self.spent() > self.budget
