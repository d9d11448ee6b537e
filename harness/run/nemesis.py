"""The nemesis: applies one fault to a run held at a kill point.

Each action is a method; the controller calls `apply(fault, incarnation)` while the worker (or the
service request) waits at the barrier, and gets back what to do with the held barrier: release it
(`GO`), leave it unanswered (`HOLD`, the worker is dead), or a fake-service decision.
"""

from __future__ import annotations

import signal
import threading
from typing import TYPE_CHECKING

from killpoint.fake_services.hooks import Decision
from killpoint.env.launcher import Incarnation
from killpoint.faults.schedule import Fault

if TYPE_CHECKING:
    from killpoint.run.controller import RunController

HOLD = "hold"
"""The barrier is never answered: the worker waiting at it was killed."""

SERVICE_DECISION = {"drop": Decision.DROP, "error": Decision.ERROR, "overload": Decision.OVERLOAD}
SLOW_MS = 250
STOP_POLL_SECONDS = 0.02
BLOCKED_BY_SQL = """
SELECT 1 FROM pg_stat_activity s JOIN pg_stat_activity z ON z.pid = ANY(pg_blocking_pids(s.pid))
WHERE s.application_name = %s AND z.application_name = %s
"""
"""A row when the successor's session waits on a lock the zombie's session holds (sessions are named
by incarnation through PGAPPNAME)."""


class Nemesis:
    """Fault actions against one run's incarnations and the environment."""

    def __init__(self, ctl: RunController) -> None:
        self.ctl = ctl

    def apply(self, fault: Fault, inc: Incarnation | None, service_point: bool) -> Decision | str:
        action = fault.action
        if action in SERVICE_DECISION:
            return SERVICE_DECISION[action]
        if action == "slow":
            return Decision.slow(SLOW_MS)
        if action == "db-crash":
            return self._db_crash()
        if inc is None:
            self.ctl.history.append("fault.missed", run_id=self.ctl.run_id, reason="no live incarnation")
            return Decision.GO
        if action == "kill":
            return self._kill(inc, service_point, fault)
        if action == "term":
            return self._term(inc)
        if action == "stop":
            return self._stop(inc)
        raise ValueError(action)

    def _kill(self, inc: Incarnation, service_point: bool, fault: Fault) -> Decision | str:
        inc.send(signal.SIGKILL)
        inc.send(signal.SIGCONT)  # a stopped process only dies once continued
        inc.ended.wait(timeout=30)
        if not service_point:
            return HOLD
        # The client is gone. Before the effect, nothing is applied (as a server that notices the closed
        # connection); after it, the effect stays applied and the response goes nowhere.
        return Decision.GO if fault.point == "effect.applied" else Decision.DROP

    def _term(self, inc: Incarnation) -> Decision:
        inc.send(signal.SIGTERM)
        grace = self.ctl.options.grace

        def escalate() -> None:
            # `ended` follows the journal's inc.end; `exited` is set the moment the exit is known
            if not inc.ended.wait(timeout=grace) and not inc.exited:
                self.ctl.history.append("escalate", run_id=self.ctl.run_id, inc=inc.inc, grace=grace)
                inc.send(signal.SIGKILL)
                inc.send(signal.SIGCONT)

        threading.Thread(target=escalate, name=f"killpoint-grace-{inc.inc}", daemon=True).start()
        return Decision.GO  # the worker drains: it finishes the step it is in

    def _stop(self, inc: Incarnation) -> Decision:
        """Freeze the worker, let its lease lapse, run a successor to its end, then thaw the zombie.

        A zombie frozen inside a transaction (e.g. at checkpoint.writing) holds its row locks, and a
        successor that needs them waits for as long as the zombie is frozen: then it is thawed at once,
        as a real frozen worker would eventually be, and the two race for the row.
        """
        inc.send(signal.SIGSTOP)
        inc.stopped.wait(timeout=10)
        self.ctl.expire_lease()
        successor = self.ctl.spawn(role="successor")
        why = self._await_successor(inc, successor)
        self.ctl.history.append("thaw", run_id=self.ctl.run_id, inc=inc.inc, why=why)
        inc.send(signal.SIGCONT)
        return Decision.GO

    def _await_successor(self, zombie: Incarnation, successor: Incarnation) -> str:
        """Wait until the successor ends, waits on a lock the zombie's session holds, or time runs out."""
        with self.ctl.env.connect() as conn:
            while not successor.ended.wait(timeout=STOP_POLL_SECONDS):
                if self.ctl.remaining() <= 0:
                    return "time budget spent"
                row = conn.execute(BLOCKED_BY_SQL, (successor.inc, zombie.inc)).fetchone()
                if row is not None:
                    return "successor waits on a lock the zombie holds"
        return "successor ended"

    def _db_crash(self) -> Decision:
        pg = self.ctl.env.pg
        if not pg.owned:
            self.ctl.history.append("fault.missed", run_id=self.ctl.run_id, reason="database not owned")
            return Decision.GO
        pg.crash()
        self.ctl.history.append("db.down", run_id=self.ctl.run_id)
        pg.restart()
        self.ctl.history.append("db.up", run_id=self.ctl.run_id)
        return Decision.GO

