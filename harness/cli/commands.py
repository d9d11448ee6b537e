"""The crash-suite subcommands: run, replay, explore, scenarios, report.

Each `cmd_*` takes parsed arguments and returns an exit code: 0 all pass, 1 a checker failed (or could
not decide), 2 usage or environment error (raised as KillpointError and printed by the CLI).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console

from killpoint.cli.main import add_postgres_options
from killpoint.run.history import History
from killpoint.run.options import RunOptions
from killpoint.run.scenario import Context, Scenario, ScenarioResult, find, registry
from killpoint.faults.schedule import Schedule
from killpoint.env.stepmodule import DEFAULT_STEPS, load
from killpoint.run.trial import Session, Trial

_console = Console(stderr=True, highlight=False)

SHOWN_PER_SCENARIO = 3
"""Non-passing trials printed in full per scenario; all of them are in the run directory."""


def add_common(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("environment")
    g.add_argument("--steps", default=DEFAULT_STEPS, help=f"step module of the agent (default {DEFAULT_STEPS})")
    g.add_argument("--spawn", default="fork", choices=["fork", "exec"],
                   help="incarnations from a preloaded fork server (fast) or fresh interpreters")
    g.add_argument("--worker-cmd", default=None, help="black-box worker command, e.g. 'node worker.js {run_id}'")
    g.add_argument("--previous-steps", default=None,
                   help="the agent's previous code (a step module), for the schema scenarios")
    g.add_argument("--grace", type=float, default=5.0, help="seconds between SIGTERM and SIGKILL (default 5)")
    g.add_argument("--out", default=".killpoint/runs", help="where run directories go")
    g.add_argument("--junit", default=None, help="also write JUnit XML here")
    g.add_argument("--quiet", action="store_true", help="no progress lines")
    add_postgres_options(p)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run the crash suite (all scenarios, or --scenario NAME)")
    p.add_argument("--scenario", action="append", default=None, help="a scenario to run (repeatable)")
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
    run_dir.mkdir(parents=True, exist_ok=True)
    history = History(run_dir / "history.jsonl")
    postgres = "dsn" if args.dsn else args.postgres
    say = _say(args)
    try:
        with Environment(postgres=postgres, dsn=args.dsn, allow_any_dsn=args.allow_any_dsn, spawn=args.spawn,
                         worker_cmd=args.worker_cmd, preload=[agent.module], run_dir=run_dir, say=say,
                         schema=ensure_schema) as env:
            yield Session(env, history, agent, RunOptions(grace=args.grace))
    finally:
        history.close()


def _context(args: argparse.Namespace, s: Session) -> Context:
    return Context(session=s, seed=getattr(args, "seed", 0) or 0, budget=getattr(args, "budget", 60.0),
                   say=_say(args), previous_steps=getattr(args, "previous_steps", None))


def _result(scenario: Scenario, trials: list[Trial], started: float) -> ScenarioResult:
    outcomes = {t.outcome for t in trials}
    outcome = "fail" if "fail" in outcomes else "unknown" if "unknown" in outcomes or not trials else "pass"
    reason = ""
    if scenario.expected_finding:
        outcome, reason = _negative_control(scenario, trials)
    return ScenarioResult(scenario.name, outcome, trials, time.monotonic() - started,  # type: ignore[arg-type]
                          figures=scenario.figures(trials), reason=reason)


def _negative_control(scenario: Scenario, trials: list[Trial]) -> tuple[str, str]:
    """A negative control is `expected` when it produced its finding and nothing else failed or stayed
    undecided; when the finding is missing, the harness missed what it exists to catch: a failure."""
    found = [t for t in trials if t.outcome == "fail" and scenario.finding(t)]
    others = [t for t in trials if t.outcome != "pass" and all(t is not f for f in found)]
    if not found:
        return "fail", "negative control: the expected finding was not produced"
    if others:
        return "fail", f"negative control: {len(others)} trial(s) failed otherwise than by the expected finding"
    return "expected", ""


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
    write_run_dir(s.env.run_dir, results, {**meta, "steps": s.agent.module, "steps_digest": s.agent.digest})
    if args.junit:
        Path(args.junit).write_text(junit_xml(results, s.agent.module))
    unfired = sorted({u for r in results for t in r.trials for u in t.unfired()})
    if unfired:
        print(f"\nnote: faults the runs never reached (nothing was injected there): {', '.join(unfired[:8])}"
              + (f" and {len(unfired) - 8} more" if len(unfired) > 8 else ""))
    print(f"\nrun directory: {s.env.run_dir}")
    if first is not None:
        print(f"reproduce the first failure with:\n  {first}")
    bad = [r for r in results if r.outcome in ("fail", "unknown")]
    return 1 if bad else 0


def _skipped(scenario: Scenario, ctx: Context, started: float) -> ScenarioResult | None:
    """The `skipped` result (with its reason) of a scenario that cannot run in this session, else None."""
    reason = scenario.skip_reason(ctx)
    if reason is None:
        return None
    ctx.say(f"{scenario.name}: skipped: {reason}")
    return ScenarioResult(scenario.name, "skipped", [], time.monotonic() - started, reason=reason)


def _with_shrunk(scenario: Scenario, ctx: Context, trials: list[Trial]) -> list[Trial]:
    """`trials`, plus the first failing multi-fault schedule shrunk to the fewest faults that still fail."""
    failing = [t for t in trials if t.outcome == "fail" and len(t.schedule) > 1]
    return [*trials, scenario.shrink(ctx, failing[0])] if failing else trials


def cmd_run(args: argparse.Namespace) -> int:
    names = args.scenario or list(registry())
    scenarios = [find(n) for n in names]
    results = []
    with session(args, "run") as s:
        for scenario in scenarios:
            started = time.monotonic()
            ctx = _context(args, s)
            ctx.say(f"{scenario.name}: {scenario.summary}")
            skipped = _skipped(scenario, ctx, started)
            if skipped is not None:
                results.append(skipped)
                continue
            trials = scenario.run(ctx)
            if not scenario.expected_finding:
                trials = _with_shrunk(scenario, ctx, trials)
            results.append(_result(scenario, trials, started))
        return finish(args, s, results, {"command": "run", "seed": args.seed, "scenarios": names})


def cmd_replay(args: argparse.Namespace) -> int:
    scenario = find(args.scenario)
    steps = scenario.steps or args.steps  # a scenario with its own agent names that agent's steps
    given = Schedule.parse(args.schedule, load(steps).steps) if args.schedule is not None else None
    with session(args, "replay") as s:
        started = time.monotonic()
        ctx = _context(args, s)
        skipped = _skipped(scenario, ctx, started)
        if skipped is not None:
            return finish(args, s, [skipped], {"command": "replay", "skipped": skipped.reason})
        if given is not None:
            schedule = given
            trial = scenario.trial(ctx, schedule)
        else:
            schedule = scenario.schedule_from_seed(ctx, args.seed)
            ctx.say(f"seed {args.seed} -> schedule {schedule}")
            trial = scenario.trial(ctx, schedule, args.seed)
        result = _result(scenario, [trial], started)
        return finish(args, s, [result], {"command": "replay", "schedule": str(schedule), "seed": args.seed})


def cmd_explore(args: argparse.Namespace) -> int:
    scenario = find(args.scenario)
    with session(args, "explore") as s:
        started = time.monotonic()
        ctx = _context(args, s)
        skipped = _skipped(scenario, ctx, started)
        if skipped is not None:
            return finish(args, s, [skipped], {"command": "explore", "skipped": skipped.reason})
        trials = _with_shrunk(scenario, ctx,
                              scenario.exhaustive(ctx) if args.exhaustive else scenario.random(ctx, args.random))
        result = _result(scenario, trials, started)
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
