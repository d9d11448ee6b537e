"""The crash-suite subcommands: run, replay, explore, scenarios, report.

Each `cmd_*` takes parsed arguments and returns an exit code: 0 all pass, 1 a checker failed (or could
not decide), 2 usage or environment error (raised as KillpointError and printed by the CLI).
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from killpoint.cli.config import Invocation, actions_option, invocation
from killpoint.cli.interrupted import Progress
from killpoint.cli.interrupted import report as report_interrupted
from killpoint.cli.progress import TrialProgress
from killpoint.cli.selection import refuse_empty, tested
from killpoint.env import vitals
from killpoint.env.stepmodule import AgentSpec, load
from killpoint.errors import KillpointError
from killpoint.faults.schedule import Schedule
from killpoint.run.checkpoint_store import CheckpointStore
from killpoint.run.checkpoint_store import record as record_checkpoints
from killpoint.run.history import History
from killpoint.run.opening import interrupted_by, open_session
from killpoint.run.plans import weigh_shards
from killpoint.run.scenario import Context, Scenario, ScenarioResult, find, registry, replay_command
from killpoint.run.shrinking import with_shrunk
from killpoint.run.side_by_side import run_all
from killpoint.run.store import FailureStore, remember
from killpoint.run.store import replay as replay_stored
from killpoint.run.trial import CrashFreeFailure, Session

_console = Console(stderr=True, highlight=False)

SHOWN_PER_SCENARIO = 3
"""Non-passing trials printed in full per scenario; all of them are in the run directory."""


def _say(quiet: bool) -> Callable[[str], None]:
    if quiet:
        return lambda _msg: None
    return lambda msg: _console.print(msg, style="dim", soft_wrap=True, markup=False)


@contextlib.contextmanager
def session(inv: Invocation, progress: Progress | None = None, meta: dict | None = None,
            check: Callable[[AgentSpec], None] | None = None) -> Iterator[Session]:
    """Open the session of `inv` (`run.opening.open_session`, which calls `check` with the agent it loaded
    before Postgres starts), create the agent's own schema, and yield it;
    everything is torn down after. A Postgres or fork server that died under it is one line (exit 2).
    Interrupted (Ctrl-C, SIGTERM), it writes and prints the findings of `progress` so far
    (`killpoint.cli.interrupted`); refused before any run began, it leaves no run directory behind."""
    run_dir = inv.session.run_dir
    made = [d for d in (run_dir, *run_dir.parents) if not d.exists()]  # what to remove if refused
    s: Session | None = None
    try:
        with open_session(inv.session, _say(inv.quiet), check) as s:
            s.prepare(s.agent)  # the agent's own schema, and its OWN_EFFECTS_SQL checked, before any run
            s.forget_judged = True  # a long exploration's memory stays flat (the history's file keeps all)
            try:
                yield s
            except Exception as exc:  # a Postgres or fork server that died under the run: one line, exit 2
                dead = vitals.check(s.env) or vitals.lost(exc)
                if dead is None:
                    raise
                raise dead from None
    except (KeyboardInterrupt, SystemExit) as exc:
        if s is not None and progress is not None:
            report_interrupted(s, progress, meta or {}, interrupted_by(exc))
        elif s is None:  # stopped while the session was opening: no run began, so no half a run folder
            _remove(run_dir, made)
        raise
    except KillpointError:
        if s is None or not s.history.seen("run.begin"):  # refused before any run: nothing of it is left
            _remove(run_dir, made)
        raise


def _remove(run_dir: Path, made: list[Path]) -> None:
    """The run directory, and the folders above it that `session` made, if nothing else is in them."""
    shutil.rmtree(run_dir, ignore_errors=True)
    for folder in made[1:]:
        with contextlib.suppress(OSError):
            folder.rmdir()


def _context(inv: Invocation, s: Session, display: TrialProgress | None) -> Context:
    return Context(session=s, seed=inv.seed, budget=inv.budget, say=_say(inv.quiet),
                   previous_steps=inv.session.previous_steps, named=inv.named, actions=inv.actions, shard=inv.shard,
                   on_trial=display, checkpoints=checkpoint_store(inv))


def trial_progress(inv: Invocation) -> TrialProgress | None:
    """The command's progress display (`cli.progress`); None with --quiet."""
    return None if inv.quiet else TrialProgress.for_terminal(_console)


def finish(inv: Invocation, s: Session, results: list[ScenarioResult], meta: dict,
           display: TrialProgress | None = None) -> int:
    """Print the summary and the failures in full; write the run dir and JUnit; return the exit code."""
    from killpoint.report.text import failure_blocks, run_seed, scenario_line, write_run_dir

    if display is not None:
        display.close()  # the bar stops before the summary
    dead = vitals.check(s.env)
    if dead is not None:  # verdicts reached on a dead Postgres or fork server judge the environment, not the agent
        raise dead
    print()
    for r in results:
        print(scenario_line(r))
    # one block per cause (a shrunk, fewest-fault schedule leads; where else it was met is counted under it);
    # the rest are in verdicts.json and the HTML report
    blocks, first = failure_blocks(results, s.agent.module, run_seed(meta),
                                   f"{s.env.run_dir / 'verdicts.json'}, or killpoint report {s.env.run_dir}",
                                   SHOWN_PER_SCENARIO)
    for line in blocks:
        print(line)
    write_run_dir(s.env.run_dir, results, {**meta, "steps": s.agent.module, "steps_digest": s.agent.digest,
                                          "worker_cmd": s.env.worker_cmd, "grace": s.options.grace,
                                          "run_timeout": s.options.time_budget,
                                          "adapter": s.env.adapter.name,
                                          "exit_codes": s.options.exit_codes,
                                          "allow_egress": list(getattr(s.env, "allow_egress", ())),
                                          "skip_checkers": sorted(s.skip_checkers),
                                          "previous_steps": inv.session.previous_steps})
    if inv.junit:
        from killpoint.report.junit import junit_xml  # the JUnit library: imported when asked for

        Path(inv.junit).write_text(junit_xml(results, s.agent.module, {**meta, "steps_digest": s.agent.digest}))
    unfired = sorted({u for r in results for t in r.trials for u in t.unfired()})
    if unfired:
        print(f"\nnote: faults the runs never reached (nothing was injected there): {', '.join(unfired[:8])}"
              + (f" and {len(unfired) - 8} more" if len(unfired) > 8 else ""))
    if first is not None and meta.get("command") in ("run", "explore") and meta.get("seed") is not None:
        print(f"\nbase seed {meta['seed']}: the whole run again, the same random schedules, with --seed {meta['seed']}")
    print(f"\nrun directory: {s.env.run_dir}")
    if first is not None:
        print(f"reproduce the first failure with:\n  {first}")
    if any(r.outcome == "error" for r in results):
        return 2
    bad = [r for r in results if r.outcome in ("fail", "unknown")]
    return 1 if bad else 0


def crash_free_first(inv: Invocation, s: Session, meta: dict, scenario: str) -> int | None:
    """Run and judge the agent's crash-free run before any fault: if it fails, say so at the top, with the
    worker's traceback and log, write the run directory, end with the line that reproduces it (a run of
    `scenario`, whose crash-free run comes first: `crash_free_replay`), and return the exit code (1); else
    None."""
    try:
        s.baseline()
    except CrashFreeFailure as exc:
        outcome, reason, what = (("unknown", f"the crash-free run did not finish: {exc.starved}", "run's lateness")
                                 if exc.starved else ("fail", exc.message, "failure"))
        print(f"{outcome.upper()}: {reason}")
        for line in exc.details:
            print(f"  {line}")
        print(f"  no faulted trial was run: a fault's effect could not be told apart from this {what}")
        result = ScenarioResult("crash-free", outcome, [], 0.0, reason=reason)
        code = finish(inv, s, [result], {**meta, "crash_free": outcome})
        again = "run the crash-free run again" if exc.starved else "reproduce the crash-free run's failure"
        print(f"{again} with:\n  {crash_free_replay(s, scenario)}")
        return code
    findings = s.crash_free_findings()
    if findings:  # said first: every faulted trial will show it again, under schedules that did not cause it
        print(f"FAIL: the crash-free run of {s.agent_name()} fails with no faults: "
              f"{', '.join(v.checker for v in findings)}")
        for v in findings:
            print(f"  {v.checker}: fail: {v.reason}")
            for line in v.evidence[:4]:
                print(f"    {line}")
        print("  the faulted trials below fail for this too: fix it first")
        meta["crash_free"] = "fail"
    return None


def crash_free_replay(s: Session, scenario: str) -> str:
    """The line that reproduces the session's crash-free run: a run of `scenario` with the same agent, worker,
    effects and knobs, which runs and judges the crash-free run before any fault (a replay needs a fault)."""
    env = s.env
    return replay_command(scenario, None, None, s.agent.module, s.options.grace, None, env.worker_cmd,
                          dict(env.effects) if getattr(env, "effects", None) else None,
                          env.adapter.name if env.worker_cmd else None, s.options.time_budget, command="run",
                          exit_codes=s.options.exit_codes, allow_egress=getattr(env, "allow_egress", ()),
                          skip_checkers=sorted(s.skip_checkers))


def failure_store(inv: Invocation) -> FailureStore | None:
    """The failure store (`run.store`), or None with --no-store."""
    return FailureStore() if inv.store else None


def checkpoint_store(inv: Invocation) -> CheckpointStore | None:
    """The checkpoint store (`run.checkpoint_store`), or None with --no-store."""
    return CheckpointStore() if inv.store else None


def keep_checkpoints(inv: Invocation, s: Session) -> None:
    """After a run: keep the current code's mid-run checkpoints for the next runs (`stored-checkpoints`)."""
    say = _say(inv.quiet)
    try:
        written = record_checkpoints(checkpoint_store(inv), s)
    except KillpointError as exc:  # keeping them never costs the run its verdicts...
        if isinstance(exc, vitals.EnvironmentGone) or vitals.check(s.env) is not None:
            raise  # ...but a dead Postgres or fork server is said as such
        say(f"could not keep checkpoints of {s.agent.module}: {exc.message}")
        return
    except OSError as exc:
        say(f"could not keep checkpoints of {s.agent.module} in .killpoint/checkpoints: {exc}")
        return
    if written:
        say(f"kept {len(written)} checkpoint(s) of {s.agent.module} (v{s.agent.state_version}, digest "
            f"{s.agent.digest}) in {written[0].parent}, resumed by stored-checkpoints when the code changes")


def base_seed(args: argparse.Namespace) -> None:
    """Fix `args.seed` to the run's base seed (`--seed`, else a random one) and say it (`run.seeds`)."""
    from killpoint.run.seeds import choose, seed_line

    given, args.seed = args.seed, choose(args.seed)
    print(seed_line(args.seed, given), flush=True)


def cmd_run(args: argparse.Namespace) -> int:
    names = args.scenario or list(registry())
    scenarios = [find(n) for n in names]
    skip = set(args.skip_scenario or ())
    for name in skip:
        find(name)  # a misspelt name is a usage error, not a silent no-op
    scenarios = [sc for sc in scenarios if sc.name not in skip]
    names_in_order = [sc.name for sc in scenarios]
    refuse_empty(scenarios, actions_option(args.actions), "--skip-scenario " + ",".join(sorted(skip)))
    base_seed(args)
    inv = invocation(args, "run")
    results = []
    meta = {"command": "run", "seed": args.seed, "scenarios": names, "skipped_by_user": sorted(skip)}
    progress = Progress(results, order=names_in_order)
    display = trial_progress(inv)
    with session(inv, progress, meta) as s:
        code = crash_free_first(inv, s, meta, next((sc.name for sc in scenarios if not sc.steps and not (
            sc.black_box_reason and s.env.black_box)), "crash-points"))  # a scenario that runs for this worker
        if code is not None:
            return code
        inv = replace(inv, shard=weigh_shards(scenarios, _context(inv, s, display)))  # shares by estimated cost
        run_all(scenarios, side_by_side(s),
                lambda sc, beside: results.append(one_scenario(inv, s, sc, progress, display, beside)), s.gate)
        results[:] = progress.in_order(results)  # the summary in the suite's order
        keep_checkpoints(inv, s)
        return tested(results, finish(inv, s, results, meta, display), args.allow_empty_shard)


def side_by_side(s: Session) -> bool:
    """Whether `killpoint run` runs its side-by-side scenarios at once (`run.side_by_side`): when more than one
    trial may run at once, and not for a black-box worker exec'd afresh per incarnation (each imports its
    framework: beside other scenarios' trials, a timed drain would measure the imports)."""
    return s.jobs_most > 1 and not (s.env.black_box and not s.env.black_box_forked)


def one_scenario(inv: Invocation, s: Session, scenario: Scenario, progress: Progress,
                 display: TrialProgress | None, beside: bool) -> ScenarioResult:
    """Run one scenario of `killpoint run` to its result: skipped with its reason, its trials (stored failures
    first, shrunk after), or its own error as an `error` result (a dead environment is raised). `beside`: it
    runs beside other scenarios, and measures its budget in its share of the session's time (`Context.share`)."""
    started = time.monotonic()
    ctx = _context(inv, s, display)
    if beside:
        ctx.share = lambda: s.gate.share(scenario.name)
    progress.begin(scenario.name, s)
    ctx.say(f"{scenario.name}: {scenario.summary}")
    try:
        skipped = scenario.skipped(ctx, started)
        if skipped is not None:
            return skipped
        stored = replay_stored(failure_store(inv), scenario, ctx)
        trials = with_shrunk(scenario, ctx, stored + scenario.run(ctx))
        remember(failure_store(inv), scenario, ctx, trials)
        result = scenario.result(trials, started)
        if display is not None:
            display.ended(result)  # a scenario with no per-trial progress gets its line
        return result
    except CrashFreeFailure as exc:  # the scenario's own agent fails without faults
        ctx.say(f"{scenario.name}: {exc.message}")
        return ScenarioResult(scenario.name, "fail", [], time.monotonic() - started,
                              reason="; ".join([exc.message, *exc.details[:3]]))
    except KillpointError as exc:  # one scenario's error never costs the others
        if isinstance(exc, vitals.EnvironmentGone) or vitals.check(s.env) is not None:
            raise  # ...but a dead Postgres or fork server costs them all
        ctx.say(f"{scenario.name}: error: {exc.message}")
        return ScenarioResult(scenario.name, "error", [], time.monotonic() - started,
                              reason=f"{exc.code}: {exc.message} ({exc.fix})")


def start_one(inv: Invocation, s: Session, scenario: Scenario, progress: Progress, command: str,
              display: TrialProgress | None) -> tuple[Context, float] | int:
    """What `replay` and `explore` do before their trials: judge the crash-free run first (unless the scenario
    brings its own agent), then skip the scenario with its reason if it cannot run here. An int is the exit
    code to return at once; else the scenario's context and its start time."""
    code = None if scenario.steps else crash_free_first(inv, s, {"command": command}, scenario.name)
    if code is not None:
        return code
    started = time.monotonic()
    ctx = _context(inv, s, display)
    progress.begin(scenario.name, s)
    skipped = scenario.skipped(ctx, started)
    if skipped is not None:
        return tested([skipped], finish(inv, s, [skipped], {"command": command, "skipped": skipped.reason}))
    return ctx, started


def cmd_replay(args: argparse.Namespace) -> int:
    scenario = find(args.scenario)
    # A scenario with its own agent (killpoint's: loaded here at once) names that agent's steps; a black-box
    # worker's are its framework's, unknown. The step module's are checked once the session has loaded it
    # (while its fork servers import it, before Postgres starts); the schedule's form before anything starts.
    known = load(scenario.steps).steps if scenario.steps and not args.worker_cmd else None
    given = Schedule.parse(args.schedule, known) if args.schedule is not None else None
    named: list[Schedule] = []
    check = None if given is None or known is not None or args.worker_cmd else \
        lambda agent: named.append(Schedule.parse(args.schedule, agent.steps))
    refuse_empty([scenario], actions_option(args.actions), "--scenario")
    inv = invocation(args, "replay")
    progress = Progress()
    display = trial_progress(inv)
    with session(inv, progress, {"command": "replay", "schedule": args.schedule, "seed": args.seed}, check) as s:
        given = named[0] if named else given
        begun = start_one(inv, s, scenario, progress, "replay", display)
        if isinstance(begun, int):
            return begun
        ctx, started = begun
        if given is not None:
            schedule = given
            ctx.explicit = True
            trial = scenario.trial(ctx, schedule)
        else:
            schedule = scenario.schedule_from_seed(ctx, args.seed)
            ctx.say(f"seed {args.seed} -> schedule {schedule}")
            trial = scenario.trial(ctx, schedule, args.seed)
        result = scenario.result([trial], started)
        return tested([result], finish(inv, s, [result], {"command": "replay", "schedule": str(schedule),
                                                          "seed": args.seed}, display))


def cmd_explore(args: argparse.Namespace) -> int:
    scenario = find(args.scenario)
    refuse_empty([scenario], actions_option(args.actions), "--scenario")
    base_seed(args)
    inv = invocation(args, "explore")
    progress = Progress()
    display = trial_progress(inv)
    with session(inv, progress, {"command": "explore", "seed": args.seed}) as s:
        begun = start_one(inv, s, scenario, progress, "explore", display)
        if isinstance(begun, int):
            return begun
        ctx, started = begun
        stored = replay_stored(failure_store(inv), scenario, ctx)
        trials = with_shrunk(scenario, ctx, stored + (scenario.exhaustive(ctx) if args.exhaustive
                                                      else scenario.random(ctx, args.random)))
        remember(failure_store(inv), scenario, ctx, trials)
        result = scenario.result(trials, started)
        return tested([result], finish(inv, s, [result], {"command": "explore", "seed": args.seed, "mode":
                                                          "exhaustive" if args.exhaustive else f"random {args.random}"},
                                       display), args.allow_empty_shard)


def cmd_report(args: argparse.Namespace) -> int:
    from killpoint.report.html import draw

    path, notes = draw(Path(args.run_dir))  # a torn or corrupt history: what was skipped, then the rest drawn
    for note in notes:
        print(f"note: {note}")
    print(path)
    return 0


def cmd_judge(args: argparse.Namespace) -> int:
    """Re-run every checker from `RUN_DIR/history.jsonl` alone; 0 when every recorded verdict is reproduced,
    1 when one differs."""
    from killpoint.errors import UsageError
    from killpoint.run.rejudge import rejudge

    path = Path(args.run_dir) / "history.jsonl"
    if not path.is_file():
        raise UsageError("no-history", f"{path} does not exist",
                         "give a run directory written by killpoint run, replay or explore")
    events, torn = History.read(path)
    trials = rejudge(events)
    if torn:
        print(f"note: {torn} unreadable line(s) of {path} skipped")
    if not trials:
        raise UsageError("nothing-judged", f"{path} holds no judged trial",
                         "give the run directory of a run that judged at least one trial")
    differ = [t for t in trials if not t.reproduces]
    for t in trials:
        mark = "reproduced" if t.reproduces else "DIFFERS"
        print(f"{t.outcome.upper():<8} {t.run_id:<32} {t.schedule or '(crash-free)'}  {mark}")
        for line in t.differences():
            print(f"    {line}")
    counts = {o: sum(1 for t in trials if t.outcome == o) for o in ("pass", "fail", "unknown")}
    print(f"\n{len(trials)} trials judged again from {path}: {counts['pass']} pass, {counts['fail']} fail, "
          f"{counts['unknown']} unknown; " + (f"{len(differ)} differ from the recorded verdicts" if differ
                                              else "every recorded verdict reproduced"))
    return 1 if differ else 0
