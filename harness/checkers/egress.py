"""A worker that tried to reach a host off the machine: refused by the egress guard (killpoint.env.egress),
which the worker reports in an `egress.blocked` note. Such a run did not run as the real agent would (its
request went nowhere), and on a machine without the guard it would have reached the real service once per
replay: never a pass."""

from __future__ import annotations

from killpoint.checkers.evidence import Evidence
from killpoint.checkers.verdict import Verdict, failed, passed
from killpoint.events import Note, Point

FIX = ("point the SDK at its fake ($OPENAI_BASE_URL, $ANTHROPIC_BASE_URL, $RESEND_API_URL, $STRIPE_BASE_URL, or an "
       "--effect proxy's $KILLPOINT_EFFECT_<NAME>_URL; docs/contracts.md, \"Nothing leaves the machine\"), or pass "
       "--allow-egress HOST if it is meant")


def blocked(ev: Evidence) -> list[str]:
    """One line per refused connection: host, port, the step the incarnation was in (its last kill point
    before the note; `import` before any) and the call site."""
    step: dict[str | None, str] = {}
    out = []
    for e in ev.events:
        if isinstance(e, Point) and e.step:
            step[e.inc] = e.step
        elif isinstance(e, Note) and e.note == "egress.blocked":
            out.append(f"{e.get('host')}:{e.get('port')} at step {step.get(e.inc, 'import')} "
                       f"({e.inc}, {e.get('site')})")
    return out


def no_egress(ev: Evidence, base: Evidence | None) -> Verdict:
    """Fail if any incarnation tried to reach a host the egress guard refused (see the module docstring)."""
    lines = blocked(ev)
    if lines:
        return failed("no_egress", f"a worker tried to reach {lines[0]}: refused by killpoint's egress guard. "
                      f"Fix: {FIX}", lines)
    return passed("no_egress", "no connection off the machine was attempted")
