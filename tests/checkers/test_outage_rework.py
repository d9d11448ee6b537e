"""bounded_rework and drains_on_sigterm with outages (issue 23): an outage lasts across steps and, as
`outage=N`, across incarnations, so it can end more than the one worker it hit; each worker that met no
fault of its own, sent a request into the outage and exited with an error is a fault on its step. A
worker that errors out without meeting an outage is not excused."""

from __future__ import annotations

from killpoint.checkers.evidence import Evidence
from tests.checkers.test_checkers import event, evidence, run


def _two_outage_deaths(met_outage: bool) -> Evidence:
    """plan met `outage=5` on the model and a kill in its middle (#1); #2 redid plan, sent a model request
    (into the outage, or to another service) and exited 1; #3 finished the run."""
    ev = evidence("run-2")
    rid, inc1, inc2, inc3 = ev.run_id, f"{ev.run_id}#1", f"{ev.run_id}#2", f"{ev.run_id}#3"
    source = "model" if met_outage else "mailer"
    head = [event(type="run.begin", run_id=rid), event(type="inc.start", run_id=rid, inc=inc1),
            event(type="point", run_id=rid, inc=inc1, step="plan", point="step.start"),
            event(type="point", run_id=rid, inc=inc1, step="plan", point="model.request", source="model"),
            event(type="fault", run_id=rid, inc=inc1, step="plan", point="model.request", action="outage=5", nth=1),
            event(type="point", run_id=rid, inc=inc1, step="plan", point="model.request", source="model"),
            event(type="fault", run_id=rid, inc=inc1, step="plan", point="model.request", action="clock-1h", nth=2),
            event(type="inc.end", run_id=rid, inc=inc1, signal=9),
            event(type="inc.start", run_id=rid, inc=inc2),
            event(type="point", run_id=rid, inc=inc2, step="plan", point="step.start"),
            event(type="point", run_id=rid, inc=inc2, step="plan", point="model.request", source=source),
            event(type="inc.end", run_id=rid, inc=inc2, exit_code=1, signal=None),
            event(type="inc.start", run_id=rid, inc=inc3)]
    rest = [event(type="point", run_id=rid, inc=inc3, step=e.step, point="step.start")
            for e in ev.events if e.kind == "point"]
    ev.events = [*head, *rest, event(type="inc.end", run_id=rid, inc=inc3, exit_code=0, signal=None),
                 event(type="run.end", run_id=rid)]
    ev.incarnations = [{"inc": inc1, "exit_code": None, "signal": 9}, {"inc": inc2, "exit_code": 1, "signal": None},
                       {"inc": inc3, "exit_code": 0, "signal": None}]
    return ev


def test_a_worker_an_outage_ended_beyond_the_first_is_a_fault_on_its_step() -> None:
    assert run("bounded_rework", _two_outage_deaths(met_outage=True)).outcome == "pass"


def test_a_worker_that_errored_out_of_the_outage_is_not_excused() -> None:
    verdict = run("bounded_rework", _two_outage_deaths(met_outage=False))
    assert verdict.outcome == "fail" and "plan: started 3x" in " ".join(verdict.evidence)
