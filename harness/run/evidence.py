"""A run's evidence: gathered into the history once the run has ended, and read back from it.

1. `gather(...)` reads what the run left (its checkpoint row, the audit trail of its writes, its own
   database effects, the processes still alive, which it then kills, and the fake services' attempts,
   effects and model requests) into a `Gathered`, unrecorded; the run is then retired in its runtime
   (`adapter.retire`: DBOS's unfinished workflows cancelled), so that no later run's worker takes it up.
2. `Gathered.record(history, options)` appends it to the history: a `run.evidence` event (with `options`),
   then one event per record, each with `of` = the `run.evidence` event's index; `record(...)` is both
   steps at once.
3. `from_history(events, run_id)` builds the `Evidence` the checkers judge from those events alone (the
   latest `run.evidence` of the run, its records, and the run's control events before it).
4. `record` returns `from_history` of the live history, so a verdict reached during a session and one
   reached by `killpoint judge` from `history.jsonl` are reached from the same values.
   `Gathered.evidence(history, options)` is that same Evidence before it is recorded (a crash-free run's,
   compared with another's to find its volatile fields, which are then recorded with it, once).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import psutil

from killpoint.checkers.evidence import Evidence
from killpoint.checkers.knobs import split
from killpoint.checkers.refused import refusal
from killpoint.env import audit, launcher
from killpoint.env.environment import Environment
from killpoint.env.launcher import Incarnation
from killpoint.events import (
    Attempt,
    CheckpointWrite,
    Effect,
    Event,
    ModelRequest,
    Record,
    RunEvidence,
)
from killpoint.run.history import History, as_read
from killpoint.run.options import RunOptions


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


TAIL_BYTES = 16384
"""How much of the end of a worker's log `exits` reads."""


def exits(incs: Iterable[Incarnation], shown: dict[str, dict], lines: int = 5) -> dict[str, dict]:
    """The workers that exited non-zero without a traceback (`shown`: those with one, `crashes`), with what
    they last wrote: incarnation id -> {"log", "exit_code", "tail"} as `crashes` has it, `tail` the last
    `lines` non-empty lines of the log's end (each cut at 300 characters; [] for an empty log). A worker that
    never started its agent (`python: can't open file`, a missing library) or is not written in Python says
    why only there."""
    out: dict[str, dict] = {}
    for inc in incs:
        if inc.exit_code in (None, 0) or inc.signal is not None or inc.inc in shown or not inc.log:
            continue
        try:
            with open(inc.log, "rb") as f:
                f.seek(max(0, f.seek(0, os.SEEK_END) - TAIL_BYTES))  # a chatty worker's log may be large
                text = f.read().decode(errors="replace")
        except OSError:
            continue
        tail = [line[:300] for line in text.splitlines() if line.strip()][-lines:]
        out[inc.inc] = {"log": inc.log, "exit_code": inc.exit_code, "tail": tail}
    return out


def refusals(incs: Iterable[Incarnation], shown: dict[str, dict]) -> dict[str, str]:
    """The workers that exited non-zero without a traceback (`shown`: those with one) whose log's end says
    the database refused them a connection for want of slots: incarnation id -> that line."""
    out: dict[str, str] = {}
    for inc, ended in exits(incs, shown).items():
        line = refusal(ended["tail"])
        if line is not None:
            out[inc] = line
    return out


def crashes(incs: Iterable[Incarnation]) -> dict[str, dict]:
    """The incarnations that exited non-zero with a traceback in their log: where it is, and its end."""
    out = {}
    for inc in incs:
        if inc.exit_code not in (None, 0) and inc.signal is None:
            tail = crash_tail(inc.log)
            if tail:
                out[inc.inc] = {"log": inc.log, "exit_code": inc.exit_code, "tail": tail}
    return out


@dataclass(frozen=True)
class Gathered:
    """What a run left, read once it ended (flow step 1), not yet recorded."""

    head: RunEvidence
    """The `run.evidence` event, without its `options`."""
    records: tuple[Record, ...]
    """Its checkpoint writes and service records, in the order they are recorded (`of` not yet set)."""

    def record(self, history: History, options: dict) -> Evidence:
        """Append the run's evidence to `history` with `options` and return it as the checkers see it
        (flow steps 2 and 4)."""
        run_id = self.head.run_id or ""
        head = history.add(replace(self.head, options=options))
        for r in self.records:
            history.add(replace(r, of=head.i))
        return from_history(history.of_run(run_id), run_id)

    def evidence(self, history: History, options: dict) -> Evidence:
        """The Evidence `record` would return, without recording anything: the run's control events so far,
        and what was gathered as the history would read it back (flow step 4)."""
        run_id = self.head.run_id or ""
        head = as_read(replace(self.head, options=options))
        records = [as_read(r) for r in self.records]
        return _evidence(run_id, [e for e in history.of_run(run_id) if not _gathered(e)], head, records)


def gather(env: Environment, run_id: str, incarnations: list[Incarnation], own_effects_sql: str | None, *,
           limit: str | None, watch: list[Incarnation] | None = None) -> Gathered:
    """Read `run_id`'s evidence once its incarnations have ended (flow step 1). A process of `watch`
    (default: `incarnations`) still alive is a leftover, killed once it is listed."""
    if not env.adapter.hold.owned:
        own_effects_sql = None  # a framework's worker (an adapter) is not the step module's agent
    with env.pooled() as conn:
        row = env.adapter.final(conn, run_id)  # the run's final record, where its runtime keeps it
        said = env.adapter.notes(conn, run_id)  # what the runtime's records show it did wrong, if anything
        writes = audit.writes(conn, run_id) if audit.installed(conn) else []  # none before a framework's tables
        own = [list(r) for r in conn.execute(own_effects_sql, (run_id,)).fetchall()] if own_effects_sql else []
    svc = env.services
    watched = incarnations if watch is None else watch
    left = leftovers(watched)
    died = crashes(incarnations)
    head = RunEvidence(
        run_id=run_id, final=row[0], final_raw=row[1], own_effects=own, limit=limit, leftovers=left,
        crashes=died, notes=said or None, refused=refusals(incarnations, died) or None,
        incarnations=[{"inc": i.inc, "role": i.role, "pid": i.pid, "exit_code": i.exit_code,
                       "signal": i.signal} for i in incarnations])
    if left:  # nothing alive was found: nothing of theirs can start any more (a dead process forks nothing)
        ours = [i for i in watched if isinstance(i, launcher.Incarnation)]
        if ours:
            launcher.kill_all(ours)  # what a trial's workers left (listed) must not live into the next trial
        for inc in watched:
            if not isinstance(inc, launcher.Incarnation):
                inc.kill_all()
    with env.pooled() as conn:  # read, and nothing of the run lives on: leave nothing a later run takes up
        env.adapter.retire(conn, run_id)
    records: list[Record] = [CheckpointWrite(run_id=run_id, **w) for w in writes]
    for kind, found in ((Attempt, svc.attempts(run_id)), (Effect, svc.effects(run_id)),
                        (ModelRequest, svc.model_requests(run_id))):
        records.extend(kind(run_id=run_id, record=r) for r in found)
    return Gathered(head, tuple(records))


def recorded_options(options: RunOptions) -> dict[str, Any]:
    """The knobs a run driven with `options` records in its `run.evidence` (harness/checkers/knobs.py)."""
    return {"grace": options.grace, "exit_codes": options.exit_codes, "time_budget": options.time_budget}


def record(env: Environment, history: History, run_id: str, incarnations: list[Incarnation],
           own_effects_sql: str | None, *, limit: str | None, options: dict,
           watch: list[Incarnation] | None = None) -> Evidence:
    """Gather `run_id`'s evidence once its incarnations have ended, append it to the history with `options`,
    and return it as the checkers will see it (flow steps 1, 2 and 4)."""
    return gather(env, run_id, incarnations, own_effects_sql, limit=limit, watch=watch).record(history, options)


def _gathered(e: Event) -> bool:
    return isinstance(e, (Record, RunEvidence))


def from_history(events: list[Event], run_id: str) -> Evidence:
    """The evidence of `run_id` as recorded by its latest `run.evidence` event (see the module docstring).
    Raises LookupError when the run's evidence was never recorded."""
    head = next((e for e in reversed(events) if isinstance(e, RunEvidence) and e.run_id == run_id), None)
    if head is None:
        raise LookupError(f"no evidence of run {run_id!r} in this history")
    of = head.i
    mine = [e for e in events if e.run_id == run_id]
    return _evidence(run_id, [e for e in mine if e.i < of and not _gathered(e)], head,
                     [e for e in mine if isinstance(e, Record) and e.of == of])


def _evidence(run_id: str, control: list[Event], head: RunEvidence, records: list[Record]) -> Evidence:
    """The Evidence of a run's control events, its `run.evidence` event and that event's records."""
    knobs, volatile, replay, extra = split(head.options or {})
    return Evidence(
        run_id=run_id,
        events=control,
        final=head.final,
        final_raw=head.final_raw,
        audit=[{"seq": e.seq, "cursor": e.cursor, "status": e.status, "app": e.app}
               for e in records if isinstance(e, CheckpointWrite)],
        attempts=[e.record for e in records if isinstance(e, Attempt)],
        effects=[e.record for e in records if isinstance(e, Effect)],
        model_requests=[e.record for e in records if isinstance(e, ModelRequest)],
        own_effects=head.own_effects or [],
        incarnations=head.incarnations or [],
        limit=head.limit,
        leftovers=head.leftovers or [],
        crashes=head.crashes or {},
        notes=head.notes or [],
        refused=head.refused or {},
        knobs=knobs,
        volatile=volatile,
        replay=replay,
        extra=extra,
    )
