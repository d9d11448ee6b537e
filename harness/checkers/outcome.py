"""Checkers of where the run ended: completes, same_final_state, cost_accounted."""

from __future__ import annotations

import json

from killpoint.checkers import pricing
from killpoint.checkers.evidence import Evidence, Hung, mask, not_compared, request_body
from killpoint.checkers.starved import starved
from killpoint.checkers.verdict import Verdict, failed, not_applicable, passed, unknown


def completes(ev: Evidence, base: Evidence | None) -> Verdict:
    """The run reached cursor `done` with status done within the bounds.

    0. A run with a hung incarnation (a `hung` event: still running when the time budget ran out) fails as
       hung, with where it was blocked (its stack) as the evidence; unknown instead when every hung
       incarnation spent a large share of its life waiting for a CPU (`checkers.starved`: a busy machine).
    1. A run whose last checkpoint says status `failed` (the agent gave up on it) fails as failed, naming the
       cursor and the last error (the state's `error`, else the last worker traceback), before any bound:
       it is not a liveness problem, and restarting it would only repeat the failure.
    2. A run stopped by a bound (`ev.limit`) fails as liveness.
    3. Otherwise it passes at cursor done with status done, and fails anywhere else.
    """
    stuck = hung(ev)
    busy = [starved(e.inc, e.waited, e.age, f"was still running when the time budget ran out, after {e.age:.0f}s")
            for e in stuck if e.age]
    if stuck and len(busy) == len(stuck) and all(busy):
        return Verdict("completes", "unknown", busy[0], tuple(hung_lines(stuck)))
    if stuck:
        return failed("completes", ev.limit or f"hung: {', '.join(str(e.inc) for e in stuck)}",
                      hung_lines(stuck))
    if ev.final is not None and ev.final.get("status") == "failed":
        error = last_error(ev)
        return failed("completes", f"the run ended failed at cursor {ev.final.get('cursor')!r}: {error}",
                      [f"status: failed, last error: {error}", *_last_checkpoint(ev)])
    if ev.limit:
        return failed("completes", f"liveness: {ev.limit}", _last_checkpoint(ev))
    if ev.final is None:
        return failed("completes", "no checkpoint was ever written")
    if ev.final.get("cursor") != "done" or ev.final.get("status") != "done":
        return failed("completes", f"ended at cursor {ev.final.get('cursor')!r} with status "
                      f"{ev.final.get('status')!r}", _last_checkpoint(ev))
    return passed("completes", f"done at seq {ev.final.get('seq')}")


def same_final_state(ev: Evidence, base: Evidence | None) -> Verdict:
    """The final state, cursor and status equal the crash-free run's."""
    if base is None or base.final is None:
        return unknown("same_final_state", "no crash-free baseline to compare with")
    if ev.final is None:
        return failed("same_final_state", "the run has no final checkpoint")
    volatile = base.volatile
    mine = mask(ev.normalize({k: ev.final.get(k) for k in ("cursor", "status", "state")}), "", volatile)
    theirs = mask(base.normalize({k: base.final.get(k) for k in ("cursor", "status", "state")}), "", volatile)
    if mine == theirs:
        return passed("same_final_state", "final state equals the crash-free run's" + not_compared(volatile, "state"))
    lines = []
    for k in sorted(set(mine["state"] or {}) | set(theirs["state"] or {})):
        a, b = (mine["state"] or {}).get(k), (theirs["state"] or {}).get(k)
        if a != b:
            lines.append(f"state.{k}: {_short(a)} (crash-free: {_short(b)})")
    for k in ("cursor", "status"):
        if mine[k] != theirs[k]:
            lines.append(f"{k}: {mine[k]!r} (crash-free: {theirs[k]!r})")
    return failed("same_final_state", "final state differs from the crash-free run's", lines)


def cost_accounted(ev: Evidence, base: Evidence | None) -> Verdict:
    """The cost the agent recorded equals what the model fake's answers that it kept cost.

    1. The witnesses: every model request the fake answered (`outcome` applied, with `usage`). A replayed
       request is one answer, kept once: the requests are counted once per identity (`evidence.request_body`:
       run-specific names, timestamps and the crash-free run's volatile `model.` fields left out), not per
       digest, since a replay need not resend the identical bytes (a prompt that names the current time is
       asked again in another second); the last answer of each is the one kept.
    2. Each is priced by the judge's own documented table (`killpoint.checkers.pricing`, `cost_usd` of its
       model and usage), never the agent's; the sum must equal the final checkpoint's `cost_usd` within the
       rounding of one nano-dollar per call. A cost billed again on replay, or mispriced, fails, even when
       every run (the crash-free one too) has the same wrong cost.
    3. An agent that records no `cost_usd` (a framework that does not account cost) is not judged: `n/a`,
       saying whether it made model calls, never a pass (there is no cost of its own to be right or wrong).
    4. Where the witnesses cannot price the run (no answer the fake recorded with its usage, a model missing
       from the table), the cost is compared with the crash-free run's instead: a replayed step must not be
       billed twice.
    """
    if ev.final is None:
        return unknown("cost_accounted", "the run has no final checkpoint")
    volatile = base.volatile if base is not None else frozenset()
    answered: dict[str, dict] = {}
    for r in ev.model_requests:
        if r.get("outcome") == "applied" and r.get("usage") is not None:
            same = (json.dumps(request_body(ev, r, volatile), sort_keys=True) if r.get("messages") is not None
                    else str(r.get("request_digest")))  # a record without its messages: by digest
            answered[same] = r
    if ev.final.get("cost_usd") is None:
        if ev.model_requests:
            return not_applicable("cost_accounted", f"the agent made {len(ev.model_requests)} model request(s) but "
                                  "its final checkpoint records no cost_usd: it keeps no cost, so there is none to "
                                  "check (record the cost in cost_usd to have it judged)")
        return not_applicable("cost_accounted", "the agent makes no model requests and records no cost")
    if answered and all(pricing.priced(r.get("model")) for r in answered.values()):
        mine = float(ev.final.get("cost_usd") or 0)
        witnessed = sum(pricing.cost_usd(str(r.get("model")), r.get("usage")) for r in answered.values())
        if abs(mine - witnessed) <= pricing.ROUNDING * (len(answered) + 1):
            return passed("cost_accounted", f"cost_usd {mine:.9f} equals the priced usage of the "
                          f"{len(answered)} model answer(s) kept")
        return failed("cost_accounted", f"cost_usd {mine:.9f} but the {len(answered)} model answer(s) kept "
                      f"cost {witnessed:.9f} by the price table",
                      [f"difference {mine - witnessed:+.9f} USD",
                       *(f"answer {r.get('request_digest')}: {r.get('model')} usage {r.get('usage')}"
                         for r in answered.values())])
    if not ev.model_requests and not float(ev.final.get("cost_usd") or 0):
        return not_applicable("cost_accounted", "the agent makes no model requests (cost_usd 0)")
    if base is None or base.final is None:
        return unknown("cost_accounted", "no crash-free baseline to compare with, and no priced model answers")
    mine, theirs = float(ev.final.get("cost_usd") or 0), float(base.final.get("cost_usd") or 0)
    if abs(mine - theirs) <= 1e-9 + 1e-9 * abs(theirs):
        return passed("cost_accounted", f"cost_usd {mine:.6f} equals the crash-free run's")
    return failed("cost_accounted", f"cost_usd {mine:.6f} but the crash-free run's is {theirs:.6f}",
                  [f"difference {mine - theirs:+.6f} USD"])


def hung(ev: Evidence) -> list[Hung]:
    """The `hung` events of the run (harness/run/hang.py): incarnations still running past the budget."""
    return ev.hung()


def hung_lines(stuck: list[Hung], limit: int = 7) -> list[str]:
    """A few lines per hung incarnation: which one, then the innermost frames of its stack (py-spy and
    faulthandler both print the innermost frame first)."""
    lines: list[str] = []
    for e in stuck:
        lines.append(f"{e.inc} (pid {e.pid}) hung after {e.last_point or 'no kill point'}; stack:")
        lines += [f"  {line.strip()}" for line in (e.stack or [])[:limit]]
    return lines


def last_error(ev: Evidence) -> str:
    """The last error a failed run recorded: its state's `error` (where the reference runtime writes it),
    else the last line of the last worker traceback, else "no error recorded"."""
    state = (ev.final or {}).get("state")
    if isinstance(state, dict) and state.get("error"):
        text = str(state["error"])
        return text if len(text) <= 200 else text[:197] + "..."
    for crash in reversed(list(ev.crashes.values())):
        tail = crash.get("tail") or []
        if tail:
            return str(tail[-1])
    return "no error recorded"


def _last_checkpoint(ev: Evidence) -> list[str]:
    if not ev.audit:
        return []
    w = ev.audit[-1]
    return [f"last checkpoint write: seq {w.get('seq')} cursor {w.get('cursor')} status {w.get('status')}"]


def _short(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
