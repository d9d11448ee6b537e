"""Checkers of where the run ended: completes, same_final_state, cost_accounted."""

from __future__ import annotations

from killpoint.checkers.evidence import Evidence, mask, not_compared
from killpoint.checkers.verdict import Verdict, failed, passed, unknown


def completes(ev: Evidence, base: Evidence | None) -> Verdict:
    """The run reached cursor `done` with status done within the bounds (else a liveness failure)."""
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
    """The checkpoint's cost equals the crash-free run's: a replayed step is not billed twice."""
    if base is None or base.final is None:
        return unknown("cost_accounted", "no crash-free baseline to compare with")
    if ev.final is None:
        return unknown("cost_accounted", "the run has no final checkpoint")
    mine, theirs = float(ev.final.get("cost_usd") or 0), float(base.final.get("cost_usd") or 0)
    if abs(mine - theirs) <= 1e-9 + 1e-9 * abs(theirs):
        return passed("cost_accounted", f"cost_usd {mine:.6f} equals the crash-free run's")
    return failed("cost_accounted", f"cost_usd {mine:.6f} but the crash-free run's is {theirs:.6f}",
                  [f"difference {mine - theirs:+.6f} USD"])


def _last_checkpoint(ev: Evidence) -> list[str]:
    if not ev.audit:
        return []
    w = ev.audit[-1]
    return [f"last checkpoint write: seq {w.get('seq')} cursor {w.get('cursor')} status {w.get('status')}"]


def _short(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
