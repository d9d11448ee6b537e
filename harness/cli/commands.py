"""The crash-suite subcommands: run, replay, explore, scenarios, report.

Each `cmd_*` takes parsed arguments and returns an exit code: 0 all pass, 1 a checker failed (or could
not decide), 2 usage or environment error (raised as KillpointError and printed by the CLI).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console

from killpoint.cli.args import add_common
from killpoint.env.stepmodule import load
from killpoint.errors import KillpointError
from killpoint.faults.schedule import Schedule
from killpoint.run.history import History
from killpoint.run.options import RunOptions
from killpoint.run.scenario import Context, ScenarioResult, find, registry
from killpoint.run.trial import CrashFreeFailure, Session

_console = Console(stderr=True, highlight=False)

SHOWN_PER_SCENARIO = 3
"""Non-passing trials printed in full per scenario; all of them are in the run directory."""


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run the crash suite (all scenarios, or --scenario NAME)")
    p.add_argument("--scenario", action="append", default=None, help="a scenario to run (repeatable)")
    p.add_argument("--skip-scenario", action="append", default=None, metavar="NAME",
                   help="a scenario not to run (repeatable)")
    p.add_argument("--seed", type=int, default=0, help="base seed of the randomised parts (default 0)")
    p.add_argument("--budget", type=float, default=60.0, help="seconds of random exploration per scenario")
    add_common(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("replay", help="replay one schedule (or the schedule of a seed)")
    p.add_argument("--scenario", required=True)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--schedule", help="faults, e.g. 'email:effect.applied:kill'")
    g.add_argument("--seed", type=int, help="the seed whose schedule to replay")
    add_common(p)
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser("explore", help="explore faults: every single fault, or N random schedules")
    p.add_argument("--scenario", required=True)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--exhaustive", action="store_true", help="every step x point x action, one fault each")
    g.add_argument("--random", type=int, metavar="N", help="N random multi-fault schedules")
    p.add_argument("--seed", type=int, default=0, help="base seed for --random (default 0)")
    add_common(p)
    p.set_defaults(func=cmd_explore)

    p = sub.add_parser("scenarios", help="list the scenarios")
    p.set_defaults(func=cmd_scenarios)

    p = sub.add_parser("report", help="write an HTML timeline of a run directory")
    p.add_argument("run_dir", help="a directory under .killpoint/runs/")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("judge", help="judge a run directory again, offline, from its stored history")
    p.add_argument("run_dir", help="a directory under .killpoint/runs/")
    p.set_defaults(func=cmd_judge)


def _say(args: argparse.Namespace):
    if getattr(args, "quiet", False):
        return lambda _msg: None
    return lambda msg: _console.print(msg, style="dim", soft_wrap=True, markup=False)


@contextlib.contextmanager
def session(args: argparse.Namespace, label: str) -> Iterator[Session]:
    """Load the agent, start the environment, and yield a Session; everything is torn down after."""
    from killpoint.env.environment import Environment
    from killpoint.reference_agent.schema import ensure_schema

    agent = load(args.steps)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = Path(args.out) / f"{stamp}-{label}-{os.getpid()}"
    made = [d for d in (run_dir, *run_dir.parents) if not d.exists()]  # what to remove if refused
    run_dir.mkdir(parents=True, exist_ok=True)
    history = History(run_dir / "history.jsonl")
    say = _say(args)
    try:
        with Environment(postgres=args.postgres, dsn=args.dsn, allow_any_dsn=args.allow_any_dsn, spawn=args.spawn,
                         worker_cmd=args.worker_cmd, preload=[agent.module], run_dir=run_dir, say=say,
                         schema=ensure_schema) as env:
            s = Session(env, history, agent, RunOptions(grace=args.grace))
            s.prepare(agent)  # the agent's own schema, and its OWN_EFFECTS_SQL checked, before any run
            yield s
    except (KeyboardInterrupt, SystemExit) as exc:
        # the journal says the session did not finish (and why), before everything is torn down
        history.append("session.interrupted", run_id=None,
                       by="SIGINT" if isinstance(exc, KeyboardInterrupt) else f"exit {exc.code}")
        raise
    except KillpointError:
        if not history.events("run.begin"):  # refused before any run: nothing of it is left behind
            history.close()
            shutil.rmtree(run_dir, ignore_errors=True)
            for folder in made[1:]:  # the folders above it that this made, if nothing else is in them
                with contextlib.suppress(OSError):
                    folder.rmdir()
        raise
    finally:
        history.close()


def _context(args: argparse.Namespace, s: Session) -> Context:
    named = getattr(args, "scenario", None) or ()
    return Context(session=s, seed=getattr(args, "seed", 0) or 0, budget=getattr(args, "budget", 60.0),
                   say=_say(args), previous_steps=getattr(args, "previous_steps", None),
                   named=tuple([named] if isinstance(named, str) else named))


def finish(args: argparse.Namespace, s: Session, results: list[ScenarioResult], meta: dict) -> int:
    """Print the summary and the failures in full; write the run dir and JUnit; return the exit code."""
    from killpoint.report.text import junit_xml, replay_line, scenario_line, trial_block, write_run_dir

    print()
    for r in results:
        print(scenario_line(r))
    first: str | None = None
    for r in results:
        # fewest faults first (a shrunk schedule leads); the rest are in verdicts.json and the HTML report
        shown = sorted((t for t in r.trials if t.outcome != "pass"), key=lambda t: len(t.schedule))
        for t in shown[:SHOWN_PER_SCENARIO]:
            title = "EXPECTED FINDING" if r.outcome == "expected" else t.outcome.upper()
            print()
            print("\n".join(trial_block(r.name, t, s.agent.module, title)))
        if len(shown) > SHOWN_PER_SCENARIO:
            print(f"\n... and {len(shown) - SHOWN_PER_SCENARIO} more of {r.name}: "
                  f"{s.env.run_dir / 'verdicts.json'}, or killpoint report {s.env.run_dir}")
        if first is None and shown and r.outcome in ("fail", "unknown"):
            first = replay_line(r.name, shown[0], s.agent.module)
    write_run_dir(s.env.run_dir, results, {**meta, "steps": s.agent.module, "steps_digest": s.agent.digest,
                                          "worker_cmd": s.env.worker_cmd, "grace": s.options.grace,
                                          "previous_steps": getattr(args, "previous_steps", None)})
    if args.junit:
        Path(args.junit).write_text(junit_xml(results, s.agent.module))
    unfired = sorted({u for r in results for t in r.trials for u in t.unfired()})
    if unfired:
        print(f"\nnote: faults the runs never reached (nothing was injected there): {', '.join(unfired[:8])}"
              + (f" and {len(unfired) - 8} more" if len(unfired) > 8 else ""))
    print(f"\nrun directory: {s.env.run_dir}")
    if first is not None:
        print(f"reproduce the first failure with:\n  {first}")
    if any(r.outcome == "error" for r in results):
        return 2
    bad = [r for r in results if r.outcome in ("fail", "unknown")]
    return 1 if bad else 0


def crash_free_first(args: argparse.Namespace, s: Session, meta: dict) -> int | None:
    """Run and judge the agent's crash-free run before any fault: if it fails, say so at the top, with the
    worker's traceback and log, write the run directory, and return the exit code (1); else None."""
    try:
        s.baseline()
    except CrashFreeFailure as exc:
        print(f"FAIL: {exc.message}")
        for line in exc.details:
            print(f"  {line}")
        print("  no faulted trial was run: a fault's effect could not be told apart from this failure")
        result = ScenarioResult("crash-free", "fail", [], 0.0, reason=exc.message)
        return finish(args, s, [result], {**meta, "crash_free": "fail"})
    return None


def cmd_run(args: argparse.Namespace) -> int:
    names = args.scenario or list(registry())
    scenarios = [find(n) for n in names]
    skip = set(args.skip_scenario or ())
    for name in skip:
        find(name)  # a misspelt name is a usage error, not a silent no-op
    scenarios = [sc for sc in scenarios if sc.name not in skip]
    results = []
    meta = {"command": "run", "seed": args.seed, "scenarios": names, "skipped_by_user": sorted(skip)}
    with session(args, "run") as s:
        code = crash_free_first(args, s, meta)
        if code is not None:
            return code
        for scenario in scenarios:
            started = time.monotonic()
            ctx = _context(args, s)
            ctx.say(f"{scenario.name}: {scenario.summary}")
            try:
                skipped = scenario.skipped(ctx, started)
                if skipped is not None:
                    results.append(skipped)
                    continue
                trials = scenario.with_shrunk(ctx, scenario.run(ctx))
                results.append(scenario.result(trials, started))
            except CrashFreeFailure as exc:  # the scenario's own agent fails without faults
                ctx.say(f"{scenario.name}: {exc.message}")
                results.append(ScenarioResult(scenario.name, "fail", [], time.monotonic() - started,
                                              reason="; ".join([exc.message, *exc.details[:3]])))
            except KillpointError as exc:  # one scenario's error never costs the others
                ctx.say(f"{scenario.name}: error: {exc.message}")
                results.append(ScenarioResult(scenario.name, "error", [], time.monotonic() - started,
                                              reason=f"{exc.code}: {exc.message} ({exc.fix})"))
        return finish(args, s, results, meta)


def cmd_replay(args: argparse.Namespace) -> int:
    scenario = find(args.scenario)
    steps = scenario.steps or args.steps  # a scenario with its own agent names that agent's steps
    given = Schedule.parse(args.schedule, load(steps).steps) if args.schedule is not None else None
    with session(args, "replay") as s:
        code = None if scenario.steps else crash_free_first(args, s, {"command": "replay"})
        if code is not None:
            return code
        started = time.monotonic()
        ctx = _context(args, s)
        skipped = scenario.skipped(ctx, started)
        if skipped is not None:
            return finish(args, s, [skipped], {"command": "replay", "skipped": skipped.reason})
        if given is not None:
            schedule = given
            ctx.explicit = True
            trial = scenario.trial(ctx, schedule)
        else:
            schedule = scenario.schedule_from_seed(ctx, args.seed)
            ctx.say(f"seed {args.seed} -> schedule {schedule}")
            trial = scenario.trial(ctx, schedule, args.seed)
        result = scenario.result([trial], started)
        return finish(args, s, [result], {"command": "replay", "schedule": str(schedule), "seed": args.seed})


def cmd_explore(args: argparse.Namespace) -> int:
    scenario = find(args.scenario)
    with session(args, "explore") as s:
        code = None if scenario.steps else crash_free_first(args, s, {"command": "explore"})
        if code is not None:
            return code
        started = time.monotonic()
        ctx = _context(args, s)
        skipped = scenario.skipped(ctx, started)
        if skipped is not None:
            return finish(args, s, [skipped], {"command": "explore", "skipped": skipped.reason})
        trials = scenario.with_shrunk(ctx, scenario.exhaustive(ctx) if args.exhaustive
                                      else scenario.random(ctx, args.random))
        result = scenario.result(trials, started)
        return finish(args, s, [result], {"command": "explore", "seed": args.seed,
                                          "mode": "exhaustive" if args.exhaustive else f"random {args.random}"})


def cmd_scenarios(args: argparse.Namespace) -> int:
    for name, scenario in registry().items():
        print(f"{name:<26} {scenario.summary}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from killpoint.report.html import render

    print(render(Path(args.run_dir)))
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
