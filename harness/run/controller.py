"""One worker per run: the policy that drives one run (one run id) through one schedule.

1. `run()` starts an incarnation, waits for every live one to end, and starts the next (after expiring
   the lease a dead worker held) until the run is done, refused, failed, or a bound is hit (a liveness
   limit: the incarnation bound, or the time budget, with a report of where the run hung).
2. The run's events are the `Driver`'s (harness/run/driver.py): the controller is the run's `RunListener`
   (a `Route` of its driver); each kill point is counted by a `FaultPlan` of scope "run", and a fault
   that fires is applied by the `Nemesis` while the worker (or the request) is held. A `stop` asks for
   a `successor`: one more incarnation of the run, like the loop's.
3. `evidence()` records what the run left into the history and returns it for the checkers.

Threads: the run's own loop (`run`); the driver's handlers on the barrier, service and launcher threads.
"""

from __future__ import annotations

import threading

from killpoint.checkers.evidence import Evidence
from killpoint.env.environment import Environment
from killpoint.env.launcher import Incarnation
from killpoint.faults.plan import FaultPlan
from killpoint.faults.schedule import Schedule
from killpoint.run import hang
from killpoint.run.driver import Driver, Route, kill_all
from killpoint.run.history import History
from killpoint.run.options import RunOptions

REFUSED_EXIT = 3

__all__ = ["REFUSED_EXIT", "RunController", "kill_all"]


class RunController(Route):
    """Drives one run (one run id) through one schedule, one worker at a time; its `RunListener`."""

    def __init__(self, env: Environment, history: History, run_id: str, schedule: Schedule,
                 options: RunOptions, steps_module: str, argv: list[str] | None = None) -> None:
        super().__init__(Driver(env, history, [run_id], FaultPlan(schedule, "run"), options, steps_module, self),
                         run_id)
        self.env = env
        self.history = history
        self.schedule = schedule
        self.options = options
        self.steps_module = steps_module
        self.argv = argv if argv is not None else [run_id]
        self.limit: str | None = None
        self._spawning = threading.Lock()
        self._earlier = len(history.of_run(run_id, "inc.start"))
        """Incarnations of this run id started by earlier controllers (a run paused under one agent and
        resumed under another): numbering goes on after them, so an incarnation id names one process."""

    # ---- processes -------------------------------------------------------------------------------
    def spawn(self, role: str) -> Incarnation:
        with self._spawning:
            inc_id = f"{self.run_id}#{self._earlier + len(self.incarnations) + 1}"
        return self.driver.spawn(inc_id, self.run_id, role, self.argv)

    def successor(self, run_id: str) -> Incarnation:
        """The `Policy`'s restart: one more incarnation of the run."""
        return self.spawn("successor")

    def kill_all(self) -> None:
        self.driver.kill_all()

    # ---- the loop -------------------------------------------------------------------------------
    def status(self) -> str | None:
        """The run's status in its runtime's records (the environment's adapter): done, running... or None."""
        with self.env.pooled() as conn:
            return self.env.adapter.status(conn, self.run_id)

    def finished(self, first: Incarnation, status: str | None) -> bool:
        """The run is over: its records say done (`status`, read once the incarnations ended), or a
        black-box worker exited 0 and its records do not say otherwise (nothing recorded, or done). A
        white-box worker's exit 0 after a drain is not done."""
        if status == "done":
            return True
        return self.env.black_box and first.exit_code == 0 and status is None

    def run(self) -> None:
        """Start incarnations until the run is done, refused, failed (its records say status `failed`: the
        agent gave up on it, `completes` reports why), or a bound is hit (a liveness failure)."""
        ran = ({"worker_cmd": self.env.worker_cmd, "adapter": self.env.adapter.name} if self.env.worker_cmd
               else {"steps": self.steps_module})  # what actually ran: a black-box worker is no step module
        self.history.append("run.begin", run_id=self.run_id, schedule=str(self.schedule), **ran)
        bound = self.options.incarnation_bound(len(self.schedule))
        try:
            while True:
                if len(self.incarnations) >= bound:
                    self.limit = f"not done after {len(self.incarnations)} incarnations (bound {bound})"
                    break
                first = self.spawn("worker")
                if not self._wait_all():
                    self.limit = f"not done within the time budget of {self.options.run_limit:g}s"
                    self.limit = hang.report(self.history, self.run_id, self.incarnations, self.limit) or self.limit
                    break
                self.env.settle(self.run_id)  # a dead worker's held commit lands (or not) before anyone reads
                refused = first.exit_code == REFUSED_EXIT and self.options.exit_codes == "killpoint"
                status = None if refused else self.status()
                if refused or self.finished(first, status):
                    break
                if status == "failed":  # the agent gave up on the run: a restart would only repeat it
                    break
                with self.env.pooled() as conn:
                    self.env.adapter.expire(conn, self.run_id)  # the passage of time for the dead worker's lease
        finally:
            self.kill_all()
            unfired = sorted(str(f) for f in self.driver.plan.unfired(self.run_id))
            self.history.append("run.end", run_id=self.run_id, limit=self.limit, unfired=unfired)

    def _wait_all(self) -> bool:
        while True:
            live = [i for i in self.incarnations if i.alive()]
            if not live:
                return True
            for inc in live:
                if not inc.ended.wait(timeout=self.driver.remaining()):
                    return False

    # ---- evidence ---------------------------------------------------------------------------------
    def evidence(self, own_effects_sql: str | None, extra: dict | None = None,
                 also: list[Incarnation] | None = None) -> Evidence:
        """Record the run's evidence in the history and return it; `also`: incarnations of the same run id
        driven by an earlier controller (a run resumed under other code)."""
        return self.driver.evidence(self.run_id, own_effects_sql, self.limit, extra, also)
