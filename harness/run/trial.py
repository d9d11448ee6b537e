"""One trial: a run of the agent under one schedule, judged against the crash-free baseline.

`Session` holds what trials share (the environment, the history, the loaded agent, the cached
baselines) and hands out deterministic run ids, so the same session replayed gives the same trace.
"""

from __future__ import annotations

import hashlib
import json
import threading
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from killpoint.checkers import (
    CRASH_CHECKERS,
    CheckerRef,
    Evidence,
    Verdict,
    always,
    combine,
    ref,
    run_checkers,
)
from killpoint.checkers.evidence import volatile_fields
from killpoint.checkers.outcome import completes, hung, hung_lines
from killpoint.checkers.refused import refused
from killpoint.checkers.verdict import Outcome
from killpoint.env.stepmodule import AgentSpec, import_env, prepare
from killpoint.errors import KillpointError
from killpoint.events import Judged, Point, RunEnd
from killpoint.faults.schedule import Fault, Schedule, ScheduleError
from killpoint.run.history import History
from killpoint.run.options import RunOptions
from killpoint.run.spool import Spool

if TYPE_CHECKING:  # the machinery (psycopg, the environment) is imported when a trial runs, not with the API
    import psycopg

    from killpoint.env.environment import Environment
    from killpoint.env.launcher import Incarnation
    from killpoint.env.previous import PreviousCode
    from killpoint.run.controller import RunController
    from killpoint.run.gate import Gate

Setup = Callable[["psycopg.Connection", str], dict | None]
"""Prepares the database before a trial's first incarnation (e.g. seeds an old checkpoint); may
return extra options for the checkers."""

Observe = Callable[[list["Incarnation"]], dict | None]
"""Reads what a trial's incarnations left (their logs) once the run ended: extra options for the checkers."""


@dataclass(frozen=True)
class Upgrade:
    """Run a trial's schedule under the agent's previous code first (one incarnation), then finish the
    run under the current code; `between` reads the paused checkpoint (options for the checkers)."""

    previous: AgentSpec
    between: Setup | None = None


@dataclass(frozen=True)
class TrialSpec:
    """How `Session.trial` runs and judges a schedule, beyond the session's defaults.

    `options`: the run's options (None: the session's); `checkers`: what judges it; `setup` prepares the
    database before the first incarnation; `agent`: the code it runs (None: the session's); `baseline`: the
    crash-free evidence to judge against (None: the session's, run once); `upgrade`: run the schedule under
    the previous code first (`Upgrade`); `observe` adds options for the checkers from the ended run (e.g.
    the tail of each worker's log); `alone`: judged without a crash-free baseline; `spool`: in a session
    that forgets judged runs, a passing trial keeps only its outcome and schedule in memory, its verdicts
    going to the session's spool (`Trial.spool`): set when nothing reads a passing trial's evidence after
    it is judged (the scenario's figures do not)."""

    options: RunOptions | None = None
    checkers: tuple[CheckerRef, ...] = CRASH_CHECKERS
    setup: Setup | None = None
    agent: AgentSpec | None = None
    baseline: Evidence | None = None
    upgrade: Upgrade | None = None
    observe: Observe | None = None
    alone: bool = False
    spool: bool = False


PLAIN = TrialSpec()
"""The session's defaults: the crash checkers, the session's agent and options, against its baseline."""


SELF_JUDGED = ("exactly_once", "cost_accounted", "bounded_rework", "no_rewind")
"""The checkers that can judge a crash-free run by itself (`Session.crash_free_findings`): a per-visit key
collision, a cost the price table does not witness, a step re-done with no fault, a rewind."""


class CrashFreeFailure(KillpointError):
    """The agent does not finish even with no faults: nothing a fault shows could be told apart from it,
    so no faulted trial runs. `details` are the lines that say why (the last traceback, the log);
    `starved` is set (why) when it only ran out of time on a machine too busy to run it (every hung worker
    spent a large share of its life waiting for a CPU), or the database refused a worker a connection for want
    of slots (`checkers.refused`): no evidence against the agent, an unknown."""

    exit_code = 1

    def __init__(self, agent: str, reason: str, details: list[str], starved: str = "") -> None:
        super().__init__("fails-without-faults", f"the agent {agent} fails with no faults: {reason}",
                         "fix the agent first: the worker's traceback and log are shown above")
        self.details = details
        self.starved = starved


def crash_free_failure(agent: str, ev: Evidence, exits: list[str] | None = None,
                       nothing: str | None = None) -> CrashFreeFailure | None:
    """Why a crash-free run is no reference (it did not finish as done), or None if it is one; `exits`: what
    its workers that exited non-zero without a traceback last wrote (`exit_lines`); `nothing`: why
    it recorded nothing, where its records say (`Session.why_nothing`)."""
    if ev.limit:
        reason = ev.limit
    elif ev.final is None:
        reason = nothing or "it never wrote a checkpoint"
    elif ev.final.get("status") != "done":
        state = ev.final.get("state")  # an agent's initial_state may return no dict (a list, a string)
        error = (state.get("error") if isinstance(state, dict) else None) or ev.final.get("error")
        reason = f"it ended with status {ev.final.get('status')!r} at cursor {ev.final.get('cursor')!r}" + (
            f" (last error: {error})" if error else "")
    else:
        return None
    judged = completes(ev, None)
    return CrashFreeFailure(agent, reason, [*hung_lines(hung(ev)), *crash_lines(ev.crashes), *(exits or [])],
                            starved=refused(ev) or (judged.reason if judged.outcome == "unknown" else ""))


def crash_lines(crashes: dict[str, dict]) -> list[str]:
    """The tracebacks of workers that died of an exception, each different one once (with its log)."""
    return _ending_lines(crashes, lambda w: f"died of an exception, exit {w.get('exit_code')}")


def exit_lines(exited: dict[str, dict]) -> list[str]:
    """What workers that exited non-zero without a traceback last wrote (`evidence.exits`), each different
    ending once (with its log, or that it is empty)."""
    return _ending_lines(exited, lambda w: f"exited {w.get('exit_code')}")


def _ending_lines(ended: dict[str, dict], how: Callable[[dict], str]) -> list[str]:
    """Each different log ending of `ended` (incarnation id -> {"log", "exit_code", "tail"}) once: a line
    naming its first worker, how it ended (`how`), how many more ended the same way and its log, then the
    ending's lines."""
    out: list[str] = []
    seen: dict[tuple, list[str]] = {}
    for inc, worker in ended.items():
        seen.setdefault(tuple(worker.get("tail", [])), []).append(inc)
    for tail, incs in seen.items():
        first = ended[incs[0]]
        more = f" (and {len(incs) - 1} more worker(s) the same way)" if len(incs) > 1 else ""
        out.append(f"worker {incs[0]} {how(first)}{more}; log {first.get('log')}" + (":" if tail else " (empty)"))
        out.extend(f"    {line}" for line in tail)
    return out


@dataclass(frozen=True, slots=True)
class Spooled:
    """What a spooled passing trial (`Trial.spool`) keeps in memory besides its outcome and schedule: where
    its verdicts and notes are in the spool, its run time and the faults it never reached."""

    spool: Spool
    offset: int
    seconds: float
    unfired: tuple[str, ...]


SPOOLED = Evidence("")
"""The evidence of every spooled trial: none (read nothing of it, and never change it)."""


@dataclass(slots=True)
class Trial:
    """The outcome of one trial."""

    run_id: str
    schedule: Schedule
    seed: int | None
    evidence: Evidence
    verdicts: list[Verdict]
    outcome: Outcome = field(init=False)
    steps: str | None = field(default=None, compare=False)
    """The step module the trial ran (set by `Session`), for its replay line."""
    run_dir: Path | None = field(default=None, compare=False)
    """The run directory holding the trial's history and worker logs (set by `Session`)."""
    shrunk_from: Schedule | None = field(default=None, compare=False)
    """The failing schedule this trial's was shrunk from (`Scenario.shrink`), or None."""
    remembered: bool = field(default=False, compare=False)
    """A failing schedule remembered from an earlier run (`.killpoint/failures`), replayed first."""
    spooled: Spooled | None = field(default=None, compare=False, repr=False)
    """Set when the trial's verdicts and evidence left memory for a spool (`spool`)."""

    def __post_init__(self) -> None:
        self.outcome = combine(self.verdicts)

    def failing(self) -> list[Verdict]:
        """The verdicts that failed: a list whose repr is the finding (`Failing`), for `assert ..., trial.failing()`."""
        return Failing([v for v in self.verdicts if v.outcome == "fail"], self)

    def __repr__(self) -> str:
        """Short: run id, schedule, outcome and the checkers that did not pass (the evidence is the block's,
        `killpoint.explain(trial)`)."""
        bad = [v.checker for v in self.verdicts if v.outcome not in ("pass", "n/a")]
        return (f"Trial({self.run_id} {str(self.schedule) or 'crash-free'}: {self.outcome}"
                + (f", {', '.join(bad)}" if bad else "") + ")")

    def unfired(self) -> list[str]:
        """Faults of the schedule the run never reached (nothing was injected for them)."""
        if self.spooled is not None:
            return list(self.spooled.unfired)
        return [u for e in self.evidence.events if isinstance(e, RunEnd) for u in e.unfired or []]

    def seconds(self) -> float:
        """How long the trial's run took: from its first recorded event to its last (0.0 without events)."""
        if self.spooled is not None:
            return self.spooled.seconds
        times = [e["t"] for e in self.evidence.events if isinstance(e.get("t"), (int, float))]
        return max(times) - min(times) if times else 0.0

    def written(self) -> tuple[list[dict], list[str]]:
        """The trial's verdicts (`Verdict.to_dict`) and runtime notes, as `verdicts.json` lists them; a
        spooled trial's are read back from its spool."""
        if self.spooled is not None:
            kept = self.spooled.spool.read(self.spooled.offset)
            return kept["verdicts"], kept["notes"]
        return [v.to_dict() for v in self.verdicts], list(self.evidence.notes)

    def spool(self, spool: Spool) -> None:
        """A passing trial no one will read the evidence of again (`TrialSpec.spool`) writes itself to `spool`
        (its verdicts and notes, and what the trial keeps in memory: run id, schedule, seed, run time, unfired
        faults, step module, run directory) and keeps in memory only that (`Spooled`): a few hundred bytes,
        none at all in a `Trials`, which holds it as its place in the spool. What `verdicts.json`, the summary
        and JUnit read of it is unchanged (`written`, `seconds`, `unfired`)."""
        verdicts, notes = self.written()
        seconds, unfired = self.seconds(), tuple(self.unfired())
        offset = spool.add({"verdicts": verdicts, "notes": notes, "run_id": self.run_id,
                            "schedule": _faults(self.schedule), "seed": self.seed, "seconds": seconds,
                            "unfired": list(unfired), "steps": self.steps,
                            "run_dir": None if self.run_dir is None else str(self.run_dir)})
        self.spooled = Spooled(spool, offset, seconds, unfired)
        self.verdicts, self.evidence = [], SPOOLED

    @classmethod
    def unspool(cls, spool: Spool, offset: int) -> Trial:
        """The passing trial `spool` was given at `offset` (`spool`): a new object equal to it as spooled (not
        shrunk from another schedule nor remembered: `Trials` holds such a trial whole)."""
        kept = spool.read(offset)
        trial = cls(kept["run_id"], _schedule(kept["schedule"]), kept["seed"], SPOOLED, [],
                    steps=kept["steps"], run_dir=None if kept["run_dir"] is None else Path(kept["run_dir"]),
                    spooled=Spooled(spool, offset, kept["seconds"], tuple(kept["unfired"])))
        trial.outcome = "pass"
        return trial

    def lighten(self) -> None:
        """Drop what only a finding's report reads from a judged trial's evidence (`light`), so a session
        of thousands of trials holds a few kilobytes per trial."""
        self.evidence = light(self.evidence)


def _faults(schedule: Schedule) -> list[list]:
    return [[f.step, f.point, f.action, f.nth] for f in schedule]


def _schedule(faults: list[list]) -> Schedule:
    return Schedule(tuple(Fault(*f) for f in faults))


class Trials(Sequence[Trial]):
    """Trials in order, as a list reads them (`len`, index, slice, iterate, `+`, `append`), that hold a
    spooled passing trial (`Trial.spool`) as its place in the spool: 8 bytes, not the trial (~400 bytes). Reading one
    rebuilds it from the spool (`Trial.unspool`: a new object, equal to the one spooled); every other trial
    is held whole and read back as the same object. So a scenario of 10,000 passing schedules holds 80 KB
    of places, not 10,000 trials. A trial appended before it was spooled is held whole until `settle`.
    Trials judged at the same time (`-j`) append and settle from their threads: each call holds a lock."""

    __slots__ = ("_kept", "_lock", "_places", "_spool", "_unsettled")

    def __init__(self, trials: Iterable[Trial] = ()) -> None:
        self._spool: Spool | None = None
        self._places = array("q")  # a spooled trial's offset in `_spool`; -1: held whole in `_kept`
        self._kept: dict[int, Trial] = {}
        self._unsettled: dict[int, int] = {}  # id() of a kept trial not spooled yet -> its index (`settle`)
        self._lock = threading.Lock()
        self.extend(trials)

    def _place(self, trial: Trial) -> int:
        """Where `trial` is in the spool, or -1 to hold it whole: not spooled, of another spool, or marked
        after it was spooled (`shrunk_from`, `remembered`: what `unspool` cannot give back)."""
        s = trial.spooled
        if (s is None or (self._spool is not None and s.spool is not self._spool) or trial.remembered
                or trial.shrunk_from is not None):
            return -1
        self._spool = s.spool
        return s.offset

    def append(self, trial: Trial) -> None:
        """Add `trial` at the end."""
        with self._lock:
            place = self._place(trial)
            if place < 0:
                self._kept[len(self._places)] = trial
                if trial.spooled is None:  # it may be spooled later, and `settle`d
                    self._unsettled.setdefault(id(trial), len(self._places))
            self._places.append(place)

    def extend(self, trials: Iterable[Trial]) -> None:
        """Add each of `trials` at the end, in order."""
        for t in trials:
            self.append(t)

    def settle(self, trial: Trial) -> None:
        """`trial`, held whole since it was appended and spooled since, is held by its place from now on."""
        with self._lock:  # by index, not a scan of the kept trials (a long run of failures keeps thousands)
            i = self._unsettled.get(id(trial))
            if i is None or self._kept.get(i) is not trial:
                return
            place = self._place(trial)
            if place >= 0:
                self._places[i] = place
                del self._kept[i], self._unsettled[id(trial)]

    def __len__(self) -> int:
        return len(self._places)

    def __getitem__(self, i: int | slice) -> Trial | list[Trial]:  # type: ignore[override]
        if isinstance(i, slice):
            return [self._at(j) for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError("trial index out of range")
        return self._at(i)

    def _at(self, i: int) -> Trial:
        with self._lock:
            place, spool = self._places[i], self._spool
            if place < 0:
                return self._kept[i]
        assert spool is not None
        return Trial.unspool(spool, place)

    def __iter__(self) -> Iterator[Trial]:
        for i in range(len(self)):
            yield self._at(i)

    def __add__(self, other: Iterable[Trial]) -> Trials:
        out = Trials(self)
        out.extend(other)
        return out

    def __radd__(self, other: Iterable[Trial]) -> Trials:
        out = Trials(other)
        out.extend(self)
        return out

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Trials, list)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # a mutable sequence, as a list

    def __repr__(self) -> str:
        return f"Trials({list(self)!r})"


def light(ev: Evidence) -> Evidence:
    """`ev` without what only a finding's report reads: the worker's kill-point trace (`point` events),
    the stored checkpoint and its writes, the agent's own rows, and every nested value (payloads, answers,
    transcripts) of the service records. Kept: the control events (faults, incarnations' starts and ends,
    the run's begin and end, hangs, database restarts), the incarnations, the knobs, `extra`, the notes and
    the replay metadata, and each record's scalar fields (service, key, outcome, ids, digests): what
    scenarios' figures, `unfired` and verdicts.json read."""
    def scalars(records: list[dict]) -> list[dict]:
        return [{k: v for k, v in r.items() if not isinstance(v, (dict, list))} for r in records]

    return replace(ev, events=[e for e in ev.events if not isinstance(e, Point)], final=None, final_raw=None,
                   audit=[], own_effects=[], attempts=scalars(ev.attempts), effects=scalars(ev.effects),
                   model_requests=scalars(ev.model_requests))


class Failing(list):
    """A trial's failing verdicts (a plain list to read), whose repr is what a reader of a failed assertion
    wants: the checkers that did not pass and the replay line. `shown_by` writes it (`testing.summary`, set
    when `killpoint.testing` is imported, as the pytest plugin does; the report's words live there, not in
    the run); without it, the repr is a plain list's."""

    shown_by: ClassVar[Callable[[Trial], str] | None] = None

    def __init__(self, verdicts: Iterable[Verdict], trial: Trial) -> None:
        super().__init__(verdicts)
        self.trial = trial

    def __repr__(self) -> str:
        if self.trial.outcome == "pass" or Failing.shown_by is None:
            return super().__repr__()
        return Failing.shown_by(self.trial)


class Session:
    """Shared state of the trials of one harness invocation."""

    def __init__(self, env: Environment, history: History, agent: AgentSpec, options: RunOptions, *,
                 jobs: int = 1, jobs_most: int | None = None, run_id_suffix: str = "", skip_checkers: frozenset[str] = frozenset(),
                 previous_code: PreviousCode | None = None) -> None:
        self.env = env
        self.history = history
        self.agent = agent
        self.options = options
        self._baselines: dict[str, Evidence] = {}
        self._counters: dict[str, int] = {}  # the last N of each run id prefix (`next_run_id`)
        self._gate: Gate | None = None
        self._prepared: set[str] = set()
        self._spool: Spool | None = None
        self.jobs = jobs
        """How many schedules of a scenario may run at the same time (`-j`); 1: one after another."""
        self.jobs_most = max(jobs, jobs_most or jobs)
        """How many may run at once while the cores idle (`width`); `jobs` when `-j` was given."""
        self.run_id_suffix = run_id_suffix
        """Ends every run id (`crash-points-3.gw1`): sessions sharing one database (pytest-xdist workers)
        each name their runs apart, since an id one takes is not yet in the database when another looks."""
        self._ids = threading.Lock()  # run ids: one counter, whichever thread asks
        self._shared = threading.RLock()  # the baseline cache and the prepared schemas
        self.trials = Trials()
        """Every trial this session judged, in order (what `verdicts.json` lists for a pytest session); a
        spooled one is held as its place in the spool (`Trials`)."""
        self.skip_checkers = skip_checkers
        """Checkers the user turned off (`--skip-checker NAME`): left out of every trial's judgement."""
        self.forget_judged = False
        """Once a trial is judged, forget its run: the fake services' records of it and its events in the
        history's memory (the history's file keeps them), and, if it passed, the raw parts of its evidence
        (`Trial.lighten`). The CLI turns it on, so a long exploration's memory stays flat; an API or pytest
        session keeps everything for its caller to inspect."""
        self.previous_code = previous_code
        """What the session knows of the agent's previous code from git (`--previous-steps git:REF`, or the
        default looked up on first use), for the schema scenarios; None: the session looks for none."""

    def agent_name(self, agent: AgentSpec | None = None) -> str:
        """How a message names the agent under test: its step module, or for a black-box worker the
        `--worker-cmd` it runs (its steps are not a module killpoint loaded)."""
        if self.env.worker_cmd:
            return f"--worker-cmd {self.env.worker_cmd!r}"
        return (agent or self.agent).module

    @property
    def gate(self) -> Gate:
        """How many of the session's trials run at once, whichever scenario's (`run.gate`): `jobs`, or, when
        more may run while the cores idle (`jobs_most`), a `WhileIdle` from `jobs` to `jobs_most` (each change
        a `jobs` event in the history). Made on first use, so its first look at the cores is a trial's, not the session's start."""
        with self._ids:
            if self._gate is None:
                from killpoint.run.gate import Gate
                from killpoint.run.pool import WhileIdle

                self._gate = Gate(self.jobs if self.jobs_most <= self.jobs else WhileIdle(
                    self.jobs, self.jobs_most, changed=lambda n: self.history.append(
                        "jobs", allowed=n, least=self.jobs, most=self.jobs_most)))
            return self._gate

    def next_run_id(self, prefix: str) -> str:
        """`prefix-N` (then `run_id_suffix`), N counting this session's runs of that prefix (a scenario's name):
        a scenario's ids are the same whichever scenarios ran before or beside it. On a database that already
        saw that id (a `--dsn` database kept from an earlier invocation) N moves on, so a run never resumes
        another's checkpoint."""
        with self._ids, self.env.pooled() as conn:
            n = self._counters.get(prefix, 0) + 1
            while conn.execute("SELECT 1 FROM killpoint_audit WHERE run_id = %s LIMIT 1",
                               (f"{prefix}-{n}{self.run_id_suffix}",)).fetchone():
                n += 1
            self._counters[prefix] = n
            return f"{prefix}-{n}{self.run_id_suffix}"

    def check_steps(self, schedule: Schedule, agent: AgentSpec) -> None:
        """A fault must name a step of the agent it runs on (ScheduleError naming the valid ones); a black-box
        worker's steps are not known in advance."""
        if self.env.black_box:
            return
        for fault in schedule:
            if fault.step not in agent.steps:
                raise ScheduleError(str(fault), f"unknown step {fault.step!r} of {agent.module}",
                                    f"use one of: {', '.join(sorted(agent.steps))}")

    def prepare(self, agent: AgentSpec) -> None:
        """The agent's own schema, created once per session's database (`stepmodule.prepare`). A worker
        read through a framework's adapter is not a step module: nothing of one is made for it."""
        if not self.env.adapter.hold.owned:
            return
        with self._shared:
            if agent.key not in self._prepared:
                with self.env.connect() as conn:
                    prepare(conn, agent)
                self._prepared.add(agent.key)

    def drive(self, run_id: str, schedule: Schedule, options: RunOptions, setup: Setup | None = None,
              agent: AgentSpec | None = None, argv: list[str] | None = None) -> tuple[RunController, dict]:
        """Run one run to its end and return its controller and the setup's extra options."""
        agent = agent or self.agent
        self.prepare(agent)
        if agent.path is not None:  # an earlier version of the module (env.previous): its folder comes first
            options = replace(options, extra_env={**options.extra_env, **import_env(agent)})
        extra: dict = {}
        if setup is not None:
            with self.env.connect() as conn:
                extra = setup(conn, run_id) or {}
        from killpoint.run.controller import RunController

        ctl = RunController(self.env, self.history, run_id, schedule, options, agent.module, argv)
        self.env.attach(ctl)
        try:
            ctl.run()
        finally:
            self.env.detach(ctl)
        return ctl, extra

    def baseline(self, options: RunOptions | None = None, agent: AgentSpec | None = None) -> Evidence:
        """The crash-free run of the agent with these parameters (run once per session, then cached)."""
        options = options or self.options
        agent = agent or self.agent
        key = json.dumps([agent.key, options.params], sort_keys=True)
        with self._shared:  # concurrent trials (`-j`) wait for the one crash-free run, never start another
            if key not in self._baselines:
                self._baselines[key] = self._crash_free(options, agent)
            return self._baselines[key]

    def baseline_prefix(self, options: RunOptions, agent: AgentSpec) -> str:
        """The run ids' prefix of a crash-free run: `baseline` for the session's own agent and parameters, else
        `baseline-<digest>` of the module's name and the parameters. Which scenario asks first (scenarios side
        by side, a subset of the suite) never renames a crash-free run, and the digest holds no path, so it is
        the same on any machine; two versions of one module (schema-upgrade's) share the prefix and count on."""
        if agent.key == self.agent.key and options.params == self.options.params:
            return "baseline"
        named = json.dumps([agent.module, options.params], sort_keys=True).encode()
        return f"baseline-{hashlib.sha256(named).hexdigest()[:6]}"

    def _crash_free(self, options: RunOptions, agent: AgentSpec) -> Evidence:
        """Two crash-free runs, each of which must finish (else `CrashFreeFailure`). The second is the
        reference: the fields in which it differs from the first (and those the module declares) are
        recorded with it, once, as `volatile`: left out of every comparison, and listed where they are."""
        from killpoint.run import evidence as evidence_mod

        quiet, prefix = replace(options, step_delay=0.0), self.baseline_prefix(options, agent)
        ctl, _ = self.drive(self.next_run_id(prefix), Schedule(), quiet, agent=agent)
        first = ctl.evidence(agent.own_effects_sql)
        self._raise_unless_finished(agent, first, ctl.incarnations)
        ctl, _ = self.drive(self.next_run_id(prefix), Schedule(), quiet, agent=agent)
        gathered = evidence_mod.gather(self.env, ctl.run_id, ctl.incarnations, agent.own_effects_sql,
                                       limit=ctl.limit)
        recorded = evidence_mod.recorded_options(quiet)
        second = gathered.evidence(self.history, recorded)
        if crash_free_failure(agent.module, second) is None:
            volatile = sorted(volatile_fields(first, second) | set(agent.nondeterministic))
            if volatile:
                recorded = {**recorded, "volatile": volatile}
        second = gathered.record(self.history, recorded)
        self._raise_unless_finished(agent, second, ctl.incarnations)
        return second

    def _raise_unless_finished(self, agent: AgentSpec, ev: Evidence, incarnations: list[Incarnation]) -> None:
        """`CrashFreeFailure` if the crash-free run `ev` is no reference, with what its workers last wrote and,
        for a black-box worker that recorded nothing under its run id, where its records went (`why_nothing`)."""
        from killpoint.run.evidence import exits

        nothing = self.why_nothing(ev.run_id) if ev.final is None and not ev.limit and self.env.black_box else None
        failure = crash_free_failure(self.agent_name(agent), ev, exit_lines(exits(incarnations, ev.crashes)), nothing)
        if failure is not None:
            raise failure

    def why_nothing(self, run_id: str) -> str | None:
        """Why a black-box worker's run left no record under `run_id`, when the runtime's records show it: they
        hold run ids this session never gave (`Adapter.recorded`: the worker records under an id of its own),
        or the framework's table does not exist in the run's database (the worker keeps its records
        elsewhere: an in-memory checkpointer, a SQLite file). None when neither."""
        from killpoint.adapters.base import table_exists

        adapter = self.env.adapter
        given = sorted({e.run_id for e in self.history.events("run.begin") if e.run_id})
        with self.env.pooled() as conn:
            elsewhere = adapter.recorded(conn, given)
            absent = not adapter.hold.owned and not table_exists(conn, adapter.hold.table)
        if elsewhere:
            return (f"it recorded nothing under its run id {run_id!r}, and its records hold run ids killpoint did "
                    f"not give it ({', '.join(map(repr, elsewhere))}): record each run under the id the worker is "
                    "given ({run_id} in --worker-cmd, or $KILLPOINT_RUN_ID), not one of its own")
        if absent:
            return (f"it recorded nothing: the {adapter.name} table {adapter.hold.table} was never created in the "
                    f"run's database: keep the {adapter.name} records in the database DATABASE_URL names (an "
                    "in-memory checkpointer or a SQLite file keeps nothing a restarted process, or killpoint, can "
                    "read)")
        return None

    def crash_free_findings(self, options: RunOptions | None = None, agent: AgentSpec | None = None) -> list[Verdict]:
        """The failing verdicts of the crash-free run judged by itself (`SELF_JUDGED`): what is wrong with no
        fault at all (every run bills a step twice, a loop's second pass is deduplicated away), to be said
        before any faulted trial finds it again under an unrelated schedule."""
        base = self.baseline(options, agent)
        return [v for v in run_checkers(SELF_JUDGED, base, base) if v.outcome == "fail"]

    def trial(self, schedule: Schedule, spec: TrialSpec = PLAIN, *, prefix: str = "run", seed: int | None = None,
              explicit: bool = True, run_id: str | None = None) -> Trial:
        """Run `schedule` as `spec` says (`TrialSpec`) and judge it against the baseline.

        With `spec.upgrade`, the schedule is run under the previous code for one incarnation first (a fault
        pauses or kills it), `upgrade.between` reads what it left, and the agent then finishes the run
        crash-free; the evidence covers both. The run id is `prefix-N`. `explicit`: the schedule was written
        by a user (a fault that never fires leaves the trial unknown); generated schedules pass False.
        `run_id`: the id `next_run_id` gave this trial beforehand (schedules run at the same time are
        numbered in schedule order, not in the order they end); None takes the next."""
        options = spec.options or self.options
        agent = spec.agent or self.agent
        upgrade, baseline = spec.upgrade, spec.baseline
        self.check_steps(schedule, upgrade.previous if upgrade is not None else agent)
        base = None if spec.alone else baseline if baseline is not None else self.baseline(options, agent)
        run_id = run_id or self.next_run_id(prefix)
        earlier: list = []
        extra: dict = {}
        flags = self.replay_flags(schedule, explicit)
        if upgrade is not None:
            first, extra = self.drive(run_id, schedule, replace(options, max_incarnations=1), spec.setup,
                                      upgrade.previous)
            earlier = first.incarnations
            if upgrade.between is not None:
                with self.env.connect() as conn:
                    extra.update(upgrade.between(conn, run_id) or {})
            ctl, _ = self.drive(run_id, Schedule(), options, None, agent)
        else:
            ctl, extra = self.drive(run_id, schedule, options, spec.setup, agent)
        if spec.observe is not None:
            extra.update(spec.observe([*earlier, *ctl.incarnations]) or {})
        extra.update(flags)
        trial = self.judge(run_id, schedule, seed, ctl.evidence(agent.own_effects_sql, extra, also=earlier), base,
                           spec.checkers)
        trial.steps, trial.run_dir = agent.module, self.env.run_dir
        if self.forget_judged:
            self.forget(trial, spec.spool)
        return trial

    def forget(self, trial: Trial, spool: bool = False) -> None:
        """Forget `trial`'s run (`forget_judged`): a run billed in a shared provider account is kept by the
        fake services (another run may still replay its keys). A passing trial is spooled (`Trial.spool`)
        when `spool` says nothing will read its evidence again, else lightened (`Trial.lighten`)."""
        self.env.services.forget(trial.run_id)
        self.history.forget(trial.run_id)
        self.env.launcher.release(trial.run_id)
        if trial.outcome == "pass":
            if spool:
                trial.spool(self.spool())
                self.trials.settle(trial)
            else:
                trial.lighten()

    def spool(self) -> Spool:
        """The session's spool (`run.spool`), made in its run directory on first use."""
        with self._shared:
            if self._spool is None:
                self._spool = Spool(self.env.run_dir)
            return self._spool

    def replay_flags(self, schedule: Schedule, explicit: bool) -> dict:
        """What a trial's evidence must record for its replay line to run it again alike (`extra`): that its
        schedule was explicit, and the worker command, adapter, effect proxies and allowed hosts of this
        session, and the checkers it leaves out."""
        flags: dict = {"explicit": True} if explicit and len(schedule) else {}
        if self.env.worker_cmd:
            flags["worker_cmd"] = self.env.worker_cmd  # the replay line must run the same worker
            flags["adapter"] = self.env.adapter.name  # ... read through the same adapter (--adapter)
        if getattr(self.env, "effects", None):
            flags["effects"] = dict(self.env.effects)  # ... through the same proxies (--effect)
        if getattr(self.env, "allow_egress", ()):
            flags["allow_egress"] = list(self.env.allow_egress)  # ... let reach the same hosts (--allow-egress)
        if self.skip_checkers:
            flags["skip_checkers"] = sorted(self.skip_checkers)  # ... judged by the same checkers (--skip-checker)
        return flags

    def judge(self, run_id: str, schedule: Schedule, seed: int | None, ev: Evidence, base: Evidence | None,
              checkers: Iterable[CheckerRef]) -> Trial:
        """Judge a run's evidence (see `judge`), without the checkers the user skipped; the trial is kept
        in `trials`."""
        checkers = [c for c in checkers if ref(c).rpartition(":")[2] not in self.skip_checkers]
        trial = judge(self.history, run_id, schedule, seed, ev, base, checkers)
        self.trials.append(trial)
        return trial


def judge(history: History, run_id: str, schedule: Schedule, seed: int | None, ev: Evidence,
          base: Evidence | None, checkers: Iterable[CheckerRef]) -> Trial:
    """Judge a run's recorded evidence with `checkers` against the baseline `base`, and record the verdict
    event (which checkers, which baseline, what each concluded) that `killpoint judge` reproduces."""
    checkers = list(checkers)
    checkers += [c for c in always(ev) if c not in checkers]
    trial = Trial(run_id, schedule, seed, ev, run_checkers(checkers, ev, base))
    history.add(Judged(run_id=run_id, outcome=trial.outcome, schedule=str(schedule), seed=seed,
                       checkers=[ref(c) for c in checkers], baseline=base.run_id if base is not None else None,
                       verdicts=[v.to_dict() for v in trial.verdicts], failing=[v.checker for v in trial.failing()]))
    return trial


def point_occurrences(base: Evidence) -> dict[str, dict[str, int]]:
    """For each step, the points the crash-free run reached more than once, and how many times
    (`faults.schedule.Occurrences`: the exhaustive sweep faults each occurrence)."""
    seen = Counter((e.step, e.point) for e in base.events if isinstance(e, Point) and e.step)
    out: dict[str, dict[str, int]] = {}
    for (step, point), n in seen.items():
        if n > 1:
            out.setdefault(step, {})[point] = n
    return out


def step_points(base: Evidence) -> dict[str, list[str]]:
    """For each step, the kill points it reached in the crash-free run, in the order first reached."""
    out: dict[str, list[str]] = {}
    for e in base.events:
        if isinstance(e, Point) and e.step:
            points = out.setdefault(e.step, [])
            if e.point not in points:
                points.append(e.point)
    return out
