"""A session that tests nothing never exits 0 (issue 29, item 7): a selection that cannot run a single trial
is refused before anything starts (one line, exit 2); a session whose every scenario was skipped says so
after its summary (error[nothing-tested], exit 2), except a shard with nothing to do that was asked to
accept it (`--allow-empty-shard`, what the CI templates pass)."""

from __future__ import annotations

import subprocess

import pytest

from tests.helpers.sandbox import Sandbox

SCENARIOS = ("concurrent-runs", "crash-points", "db-crash", "deploy-drain", "flaky-services", "fleet", "mixed-faults",
             "non-idempotent-downstream", "rollback-refusal", "sampling-model", "schema-upgrade", "shared-account",
             "stalled-sweep", "stored-checkpoints", "zombie-worker")

REFUSED: dict[str, tuple[tuple[str, ...], str, str]] = {
    "actions-none-of-the-scenarios": (("run", "--scenario", "crash-points", "--actions", "drop"),
                                      "nothing-selected", "--actions drop"),
    "explore-actions-none": (("explore", "--scenario", "crash-points", "--random", "3", "--actions", "slow"),
                             "nothing-selected", "no trial would run"),
    "replay-actions-none": (("replay", "--scenario", "crash-points", "--seed", "3", "--actions", "overload"),
                            "nothing-selected", "no trial would run"),
    "skip-the-one-named": (("run", "--scenario", "crash-points", "--skip-scenario", "crash-points"),
                           "nothing-selected", "leaves no scenario"),
    "skip-every-scenario": (("run", *(w for n in SCENARIOS for w in ("--skip-scenario", n))),
                            "nothing-selected", "leaves no scenario"),
    "empty-schedule": (("replay", "--scenario", "crash-points", "--schedule", ""), "bad-option", "holds no fault"),
    "blank-schedule": (("replay", "--scenario", "crash-points", "--schedule", ",, ,"), "bad-option",
                       "holds no fault"),
    "empty-dsn": (("replay", "--scenario", "crash-points", "--schedule", "email:effect.applied:kill", "--dsn", ""),
                  "dsn-empty", "throwaway server"),
    "blank-dsn-doctor": (("doctor", "--dsn", "  "), "dsn-empty", "throwaway server"),
}


def _one_line(proc: subprocess.CompletedProcess[str], code: str) -> str:
    err = proc.stderr.strip()
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], err[-2000:])
    assert "Traceback" not in err, err
    last = err.splitlines()[-1]
    assert last.startswith(f"killpoint: error[{code}]: ") and ". Fix: " in last, err
    return last


@pytest.mark.parametrize("name", list(REFUSED))
def test_a_selection_that_runs_nothing_is_refused_before_it_starts(sandbox: Sandbox, name: str) -> None:
    argv, code, words = REFUSED[name]
    proc = sandbox.run(*argv, "--quiet", "--out", str(sandbox.out)) if argv[0] != "doctor" else sandbox.run(*argv)
    assert words in _one_line(proc, code)
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert sandbox.survivors() == []
    assert not sandbox.out.exists() or not any(sandbox.out.iterdir())


def test_a_shard_with_nothing_to_do_exits_2_unless_allowed(sandbox: Sandbox, dsn_args: list[str]) -> None:
    argv = ("explore", "--scenario", "crash-points", "--random", "1", "--seed", "1", "--shard", "999/1000",
            "--no-store", "--quiet", "--out", str(sandbox.out), *dsn_args)
    last = _one_line(sandbox.run(*argv), "nothing-tested")
    assert "no trial ran" in last and "--allow-empty-shard" in last
    allowed = sandbox.run(*argv, "--allow-empty-shard")
    assert allowed.returncode == 0, allowed.stderr
    assert "this shard has nothing to do" in allowed.stderr
    assert sum(1 for _ in sandbox.out.glob("*/verdicts.json")) == 2  # both judged, and said so in the run dir


def test_stored_checkpoints_with_nothing_kept_is_not_a_pass(sandbox: Sandbox, dsn_args: list[str]) -> None:
    proc = sandbox.run("replay", "--scenario", "stored-checkpoints", "--seed", "5", "--quiet",
                       "--out", str(sandbox.out), *dsn_args)
    assert "stored-checkpoints" in _one_line(proc, "nothing-tested")
