"""`--run-timeout` (RunOptions.time_budget): the seconds one run may take before it is judged not done. A
scenario may hold its runs to less (`budget_cap`); the run's knob records the user's value, and a replay line
carries it when it is not the default, so the line reproduces a hang under the same bound."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from killpoint.checkers.knobs import split
from killpoint.cli.config import invocation
from killpoint.cli.main import parser
from killpoint.faults.schedule import Schedule
from killpoint.run.evidence import recorded_options
from killpoint.run.options import RunOptions
from killpoint.run.scenario import replay_command


def test_the_run_is_held_to_the_lower_of_the_users_timeout_and_the_scenarios_cap() -> None:
    assert RunOptions().run_limit == 60.0
    assert replace(RunOptions(), budget_cap=40.0).run_limit == 40.0
    assert RunOptions(time_budget=15.0, budget_cap=40.0).run_limit == 15.0
    assert RunOptions(time_budget=600.0, budget_cap=40.0).run_limit == 40.0


def test_the_knob_records_the_users_timeout_and_the_replay_line_repeats_it_unless_default() -> None:
    capped = RunOptions(time_budget=15.0, budget_cap=40.0)
    knobs = split(recorded_options(capped))[0]
    assert knobs.time_budget == 15.0
    schedule = Schedule.parse("email:effect.applied:kill")
    assert "--run-timeout 15 " in replay_command("crash-points", schedule, run_timeout=15.0) + " "
    assert "--run-timeout" not in replay_command("crash-points", schedule, run_timeout=60.0)
    assert "--run-timeout" not in replay_command("crash-points", schedule)  # a history from before the knob
    assert split({"grace": 5.0})[0].time_budget is None


def test_the_cli_option_reaches_the_sessions_options(tmp_path: Path) -> None:
    args = parser().parse_args(["replay", "--scenario", "crash-points", "--schedule", "email:effect.applied:kill",
                                "--run-timeout", "15", "--out", str(tmp_path)])
    assert invocation(args, "replay").session.options.time_budget == 15.0
    default = parser().parse_args(["run", "--out", str(tmp_path)])
    assert invocation(default, "run").session.options.time_budget == 60.0
