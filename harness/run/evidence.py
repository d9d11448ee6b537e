"""A run's evidence: gathered into the history once the run has ended, and read back from it.

1. `record(...)` reads what the run left (its checkpoint row, the audit trail of its writes, its own
   database effects, the fake services' attempts, effects and model requests, the processes still alive)
   and appends it to the history: a `run.evidence` event, then one event per record, each with
   `of` = the `run.evidence` event's index.
2. `from_history(events, run_id)` builds the `Evidence` the checkers judge from those events alone (the
   latest `run.evidence` of the run, its records, and the run's control events before it).
3. `record` returns `from_history` of the live history, so a verdict reached during a session and one
   reached by `killpoint judge` from `history.jsonl` are reached from the same values.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from pathlib import Path

import psutil

from killpoint.checkers.evidence import Evidence
from killpoint.env import audit, launcher
from killpoint.env.environment import Environment
from killpoint.env.launcher import Incarnation
from killpoint.run.history import EVIDENCE_KINDS, Event, History

SERVICE_RECORDS = ("attempt", "effect", "model.request")


def leftovers(incs: Iterable[Incarnation]) -> list[str]:
    """Processes of `incs` still alive (not zombies), with whatever they started, if the launcher knows."""
    incs = list(incs)
    ours = [i for i in incs if isinstance(i, launcher.Incarnation)]
    out: list[str] = launcher.leftovers(ours) if ours else []  # one pass over the process table for them all
    for inc in incs:
        if isinstance(inc, launcher.Incarnation):
            continue
        more = getattr(inc, "leftovers", None)
        if callable(more):
            out.extend(more())
            continue
        with contextlib.suppress(psutil.NoSuchProcess):
            if inc.pid and psutil.Process(inc.pid).status() != psutil.STATUS_ZOMBIE and inc.alive():
                out.append(f"pid {inc.pid} ({inc.inc})")
    return out


TAIL_LINES = 12


def crash_tail(log: str | None) -> list[str]:
    """The last traceback in a worker's log (at most TAIL_LINES lines), or [] if it holds none."""
    if not log:
        return []
    try:
        text = Path(log).read_text(errors="replace")
    except OSError:
        return []
    at = text.rfind("Traceback (most recent call last):")
    if at < 0:
        return []
    lines = [line for line in text[at:].splitlines() if line.strip()]
    return lines if len(lines) <= TAIL_LINES else [lines[0], "...", *lines[-(TAIL_LINES - 2):]]


def crashes(incs: Iterable[Incarnation]) -> dict[str, dict]:
    """The incarnations that exited non-zero with a traceback in their log: where it is, and its end."""
    out = {}
    for inc in incs:
        if inc.exit_code not in (None, 0) and inc.signal is None:
            tail = crash_tail(inc.log)
            if tail:
                out[inc.inc] = {"log": inc.log, "exit_code": inc.exit_code, "tail": tail}
    return out


def record(env: Environment, history: History, run_id: str, incarnations: list[Incarnation],
           own_effects_sql: str | None, *, limit: str | None, options: dict,
           watch: list[Incarnation] | None = None) -> Evidence:
    """Gather `run_id`'s evidence once its incarnations have ended, append it to the history, and return
    it as the checkers will see it. A process of `watch` (default: `incarnations`) still alive is a
    leftover."""
    if not env.adapter.hold.owned:
        own_effects_sql = None  # a framework's worker (an adapter) is not the step module's agent
    with env.pooled() as conn:
        row = env.adapter.final(conn, run_id)  # the run's final record, where its runtime keeps it
        writes = audit.writes(conn, run_id) if audit.installed(conn) else []  # none before a framework's tables
        own = [list(r) for r in conn.execute(own_effects_sql, (run_id,)).fetchall()] if own_effects_sql else []
    svc = env.services
    watched = incarnations if watch is None else watch
    left = leftovers(watched)
    head = history.append(
        "run.evidence", run_id=run_id, final=row[0], final_raw=row[1],
        own_effects=own, limit=limit, options=options,
        leftovers=left, crashes=crashes(incarnations),
        incarnations=[{"inc": i.inc, "role": i.role, "pid": i.pid, "exit_code": i.exit_code,
                       "signal": i.signal} for i in incarnations])
    if left:  # nothing alive was found: nothing of theirs can start any more (a dead process forks nothing)
        ours = [i for i in watched if isinstance(i, launcher.Incarnation)]
        if ours:
            launcher.kill_all(ours)  # what a trial's workers left (now recorded) must not live into the next trial
        for inc in watched:
            if not isinstance(inc, launcher.Incarnation):
                inc.kill_all()
    of = head["i"]
    for w in writes:
        history.append("checkpoint.write", run_id=run_id, of=of, **w)
    for kind, records in (("attempt", svc.attempts(run_id)), ("effect", svc.effects(run_id)),
                          ("model.request", svc.model_requests(run_id))):
        for r in records:
            history.append(kind, of=of, record=r, run_id=run_id)
    return from_history(history.of_run(run_id), run_id)


def from_history(events: list[Event], run_id: str) -> Evidence:
    """The evidence of `run_id` as recorded by its latest `run.evidence` event (see the module docstring).
    Raises LookupError when the run's evidence was never recorded."""
    head = next((e for e in reversed(events) if e["type"] == "run.evidence" and e.get("run_id") == run_id), None)
    if head is None:
        raise LookupError(f"no evidence of run {run_id!r} in this history")
    of = head["i"]
    mine = [e for e in events if e.get("run_id") == run_id]
    records = {k: [e for e in mine if e["type"] == k and e.get("of") == of] for k in EVIDENCE_KINDS}
    return Evidence(
        run_id=run_id,
        events=[e for e in mine if e["i"] < of and e["type"] not in EVIDENCE_KINDS and e["type"] != "run.evidence"],
        final=head.get("final"),
        final_raw=head.get("final_raw"),
        audit=[{k: e.get(k) for k in ("seq", "cursor", "status", "app")} for e in records["checkpoint.write"]],
        attempts=[e["record"] for e in records["attempt"]],
        effects=[e["record"] for e in records["effect"]],
        model_requests=[e["record"] for e in records["model.request"]],
        own_effects=head.get("own_effects") or [],
        incarnations=head.get("incarnations") or [],
        limit=head.get("limit"),
        leftovers=head.get("leftovers") or [],
        options=head.get("options") or {},
        crashes=head.get("crashes") or {},
    )

