"""Knobs of a run, with the defaults a user gets."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RunOptions:
    """How one run is driven. Durations in seconds.

    `grace` is the termination grace period after SIGTERM (Kubernetes' terminationGracePeriodSeconds);
    `max_incarnations` and `time_budget` bound the run (hitting one is a liveness failure): `time_budget` is
    the user's `--run-timeout`, and `budget_cap` a scenario's own bound below it (its runs are short by
    design); `run_limit` is the one the run is held to;
    `lease_seconds`, `drain_seconds`, `step_delay` and `slow_steps` (the steps `step_delay` applies to;
    every step when empty) are passed to the worker.
    `exit_codes` is the exit-code convention the checkers may hold the worker to: "killpoint" (the
    reference runtime's, docs/contracts.md section 2: 0 drained, 4/5 fenced, 6 drain deadline...) or
    "none" (a black-box worker's exit codes mean nothing: drain and fencing are judged from its effects
    and checkpoints alone).
    """

    grace: float = 5.0
    max_incarnations: int | None = None
    time_budget: float = 60.0
    budget_cap: float | None = None
    lease_seconds: float = 30.0
    drain_seconds: float = 4.0
    step_delay: float = 0.0
    slow_steps: tuple[str, ...] = ()
    params: dict = field(default_factory=dict)
    extra_env: dict[str, str] = field(default_factory=dict)
    exit_codes: str = "killpoint"

    @property
    def run_limit(self) -> float:
        """Seconds a run may take before it is judged not done: `time_budget`, or `budget_cap` if lower."""
        return self.time_budget if self.budget_cap is None else min(self.time_budget, self.budget_cap)

    def incarnation_bound(self, faults: int) -> int:
        """Each fault may end one incarnation and start a successor; leave room for both and a margin."""
        return self.max_incarnations or (3 + 3 * faults)


def default_exit_codes(worker_cmd: str | None) -> str:
    """The exit-code convention a session holds its workers to unless told otherwise (`--exit-codes`): the
    reference runtime's ("killpoint"), or none for a black-box worker, whose exit codes are its own."""
    return "none" if worker_cmd else "killpoint"
