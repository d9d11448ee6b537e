"""`no_egress`: a refused connection (an `egress.blocked` note) fails the run, naming host, port and the
step the incarnation was in; `always` adds the checker only to a run that has one."""

from __future__ import annotations

from killpoint.checkers import ALWAYS, Evidence, always
from killpoint.checkers.egress import no_egress
from killpoint.events import decode


def _ev(*events: dict) -> Evidence:
    return Evidence(run_id="r", events=[decode(e) for e in events])


def test_a_refused_connection_fails_naming_host_port_and_step() -> None:
    ev = _ev({"type": "point", "run_id": "r", "inc": "r#1", "step": "charge", "point": "step.start"},
             {"type": "note", "run_id": "r", "inc": "r#1", "note": "egress.blocked", "host": "203.0.113.1",
              "port": 443, "site": "agent.py:9 in _reach"})
    v = no_egress(ev, None)
    assert v.outcome == "fail"
    assert "203.0.113.1:443 at step charge" in v.reason and "--allow-egress" in v.reason
    assert always(ev) == (*ALWAYS, "no_egress")


def test_before_any_step_it_is_the_import() -> None:
    ev = _ev({"type": "note", "run_id": "r", "inc": "r#1", "note": "egress.blocked", "host": "api.openai.com",
              "port": 443, "site": "?"})
    assert "api.openai.com:443 at step import" in no_egress(ev, None).reason


def test_a_run_without_one_keeps_its_checkers() -> None:
    ev = _ev({"type": "note", "run_id": "r", "inc": "r#1", "note": "worker.start"})
    assert no_egress(ev, None).outcome == "pass"
    assert always(ev) == ALWAYS
