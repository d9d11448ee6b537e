"""A replay line repeats the session's `--skip-checker`s, so that the replay is judged by the checkers that
judged the trial it repeats: the line of a run that left `same_final_state` out used to judge it again, and
failed by a checker the user had turned off."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from killpoint.checkers.knobs import split
from killpoint.env.postgres import PostgresHandle
from killpoint.run.scenario import replay_command
from tests.helpers.checks import describe, failing_checkers
from tests.helpers.harness import BROKEN_AGENT
from tests.helpers.sandbox import Sandbox

FAILING = "email:effect.applied:kill"


def test_the_line_names_each_skipped_checker_once_in_order() -> None:
    line = replay_command("crash-points", skip_checkers=("same_final_state", "cost_accounted"))
    assert line.endswith("--skip-checker cost_accounted --skip-checker same_final_state"), line
    assert "--skip-checker" not in replay_command("crash-points")
    _, _, replay, extra = split({"skip_checkers": ["cost_accounted"], "grace": 5.0})
    assert replay.skip_checkers == ("cost_accounted",) and "skip_checkers" not in extra


def test_the_html_reports_line_reads_them_from_meta() -> None:
    from killpoint.report.html_run import replay_for  # noqa: PLC0415

    line = replay_for("crash-points", {"schedule": FAILING, "seed": None}, {"skip_checkers": ["same_final_state"]})
    assert "--skip-checker same_final_state" in line, line


def checkers_judged(run_dir: Path) -> list[list[str]]:
    results = json.loads((run_dir / "verdicts.json").read_text())
    return [[v["checker"] for v in t["verdicts"]] for r in results for t in r["trials"]]


def test_the_printed_line_of_a_run_with_a_checker_skipped_is_judged_alike(pg_server: PostgresHandle,
                                                                          sandbox: Sandbox) -> None:
    dsn = pg_server.create_database("test_replay_skip")
    try:
        env_args = ["--dsn", dsn, "--allow-any-dsn", "--quiet"]
        first = sandbox.run("replay", "--scenario", "crash-points", "--schedule", FAILING, "--steps", BROKEN_AGENT,
                            "--skip-checker", "same_final_state", "--out", str(sandbox.out / "first"), *env_args)
        assert first.returncode == 1, describe(first)
        assert failing_checkers(first.stdout) == ["exactly_once"], describe(first)
        lines = [ln.strip() for ln in first.stdout.splitlines() if ln.strip().startswith("replay:")]
        assert len(lines) == 1, describe(first)
        argv = shlex.split(lines[0].removeprefix("replay:").strip())
        assert argv[argv.index("--skip-checker") + 1] == "same_final_state", argv
        again = sandbox.run(*argv[1:], "--out", str(sandbox.out / "again"), *env_args)
        assert again.returncode == 1, describe(again)
        assert failing_checkers(again.stdout) == failing_checkers(first.stdout), describe(again)
        (a,), (b,) = (list((sandbox.out / d).glob("*/verdicts.json")) for d in ("first", "again"))
        assert checkers_judged(a.parent) == checkers_judged(b.parent)
        assert "same_final_state" not in checkers_judged(b.parent)[0]
        assert sandbox.survivors() == []
    finally:
        pg_server.drop_database("test_replay_skip")
