"""The LangGraph and DBOS examples' check that forking their incarnations from preloaded fork servers
(harness/env/pyfork_launcher.py) changes no verdict: one schedule replayed forked and exec'd."""

from __future__ import annotations

import json

from tests.examples.frameworks import cli, run_dirs, worker_cmd
from tests.helpers.checks import describe
from tests.helpers.sandbox import Sandbox


def verdicts(box: Sandbox, before: set) -> list[dict]:
    """The verdicts of the one run directory made since `before`, without their timings."""
    (new,) = [d for d in run_dirs(box) if d not in before]
    out = json.loads((new / "verdicts.json").read_text())
    for scenario in out:
        scenario.pop("elapsed", None)
        for trial in scenario.get("trials", []):
            trial.pop("elapsed", None)
    return out


def assert_fork_matches_exec(box: Sandbox, adapter: str, example: str, scenario: str, schedule: str,
                             keyed: bool = False) -> list[dict]:
    """`killpoint replay` of `schedule` with the example's incarnations forked (the default) and exec'd
    (`--worker-preload none`): the forked session says it forked (and, for a clock fault, that the
    incarnations under it were forked from the servers under libfaketime), both give the same exit code and verdicts, and nothing is left
    running. The verdicts."""
    argv = ["replay", "--scenario", scenario, "--schedule", schedule, "--adapter", adapter,
            "--worker-cmd", worker_cmd(example, keyed=keyed)]
    found = []
    for extra in ([], ["--worker-preload", "none"]):
        before = set(run_dirs(box)) if box.out.exists() else set()
        proc = cli(box, *argv, *extra)
        assert proc.returncode in (0, 1), describe(proc)
        found.append((proc.returncode, verdicts(box, before), proc.stdout + proc.stderr))
    (fork_code, fork_verdicts, fork_out), (exec_code, exec_verdicts, exec_out) = found
    assert "worker-cmd: incarnations forked from servers that preloaded" in fork_out, fork_out
    assert "worker-cmd: every incarnation exec'd: --worker-preload none" in exec_out, exec_out
    if ":clock" in schedule:
        assert "worker-cmd: incarnations under a clock fault's shift forked from servers under libfaketime" \
            in fork_out, fork_out
    assert (fork_code, fork_verdicts) == (exec_code, exec_verdicts)
    assert not box.survivors(), box.survivors()
    return fork_verdicts
