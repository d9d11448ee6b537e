"""One SIGTERM per incarnation, as a deploy sends it (harness/run/nemesis.py, flow 5), and replay lines that
repeat the exit-code convention and the allowed hosts a trial was judged under.

A schedule may hold two `term` faults that meet one incarnation (`email:effect.received:term` then
`email:effect.applied:term`: the worker is still draining its step at the second). The nemesis sent a second
SIGTERM there. A worker may take a second SIGTERM as "stop now" (Celery's and Uvicorn's cold shutdown, or the
default action put back after the first), so correct workers FAILed drains_on_sigterm ("ended with exit 1
after SIGTERM"). A deploy sends one SIGTERM per process, then SIGKILL after the grace: the second `term` now
finds the worker draining and sends nothing.

Gallery (tests/gallery/blackbox/drain.py, black-box workers held to killpoint's exit codes):
`drain_then_cold` and `drain_then_default` (correct: they drain the first SIGTERM) must PASS, and
`exits_on_sigterm` (a bug that looks like them: no drain) must still FAIL, with a printed replay line that
reproduces it. That line used to drop `--exit-codes killpoint`, and so PASSed where the run had FAILed.
"""

from __future__ import annotations

import re
import shlex
import sys

import pytest

from killpoint.run.scenario import replay_command
from tests.helpers import REPO
from tests.helpers.sandbox import Sandbox

GALLERY = REPO / "tests" / "gallery" / "blackbox"
TWICE = "email:effect.received:term,email:effect.applied:term"
"""Two `term` faults that meet the first incarnation: the second while it drains the email step."""


def worker_cmd(name: str) -> str:
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(GALLERY / f'{name}.py'))} {{run_id}}"


def _replay(sandbox: Sandbox, dsn_args: list[str], name: str, out: str = "") -> tuple:
    done = sandbox.run("replay", "--scenario", "crash-points", "--schedule", TWICE, "--worker-cmd", worker_cmd(name),
                       "--exit-codes", "killpoint", *dsn_args, "--out", str(sandbox.out / out), timeout=240)
    verdicts = [e for e in sandbox.events() if e.get("type") == "verdict"]
    return done, verdicts


def _drains(verdict: dict) -> dict:
    return next(v for v in verdict["verdicts"] if v["checker"] == "drains_on_sigterm")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["drain_then_cold", "drain_then_default"])
def test_a_worker_that_drains_one_sigterm_passes_two_term_faults(sandbox: Sandbox, dsn_args: list[str],
                                                                name: str) -> None:
    done, (verdict,) = _replay(sandbox, dsn_args, name)
    assert done.returncode == 0, done.stdout + done.stderr  # was FAIL: "ended with exit 1 after SIGTERM"
    assert _drains(verdict)["outcome"] == "pass", verdict  # judged, not n/a
    faults = [e for e in sandbox.events() if e.get("type") == "fault" and e.get("run_id") == verdict["run_id"]]
    assert [(f["point"], f["inc"]) for f in faults] == [("effect.received", f"{verdict['run_id']}#1"),
                                                        ("effect.applied", f"{verdict['run_id']}#1")], faults


@pytest.mark.slow
def test_a_worker_that_does_not_drain_fails_and_its_replay_line_reproduces_it(sandbox: Sandbox,
                                                                              dsn_args: list[str]) -> None:
    done, (verdict,) = _replay(sandbox, dsn_args, "exits_on_sigterm")
    assert done.returncode == 1, done.stdout + done.stderr
    assert verdict["failing"] == ["drains_on_sigterm"], verdict
    assert "ended with exit 1 after SIGTERM" in _drains(verdict)["reason"], verdict
    lines = done.stdout.splitlines()
    replay = lines[lines.index("reproduce the first failure with:") + 1].strip()
    argv = shlex.split(replay)
    assert "--exit-codes" in argv and argv[argv.index("--exit-codes") + 1] == "killpoint", replay
    again = sandbox.run(*argv[1:], *dsn_args, "--out", str(sandbox.out / "again"), timeout=240)
    assert again.returncode == 1 and "drains_on_sigterm: fail" in again.stdout, again.stdout + again.stderr


def test_a_replay_line_repeats_the_convention_and_hosts_it_was_judged_under() -> None:
    """`--exit-codes` when it is not the worker's default (`none` for a `--worker-cmd`, `killpoint` for a step
    module), and each `--allow-egress` host."""
    cmd = "python w.py {run_id}"
    assert "--exit-codes killpoint" in replay_command("crash-points", worker_cmd=cmd, exit_codes="killpoint")
    assert "--exit-codes" not in replay_command("crash-points", worker_cmd=cmd, exit_codes="none")
    assert "--exit-codes" not in replay_command("crash-points", exit_codes="killpoint")
    assert "--exit-codes none" in replay_command("crash-points", exit_codes="none")
    line = replay_command("crash-points", allow_egress=("api.example.com", "10.0.0.7"))
    assert re.search(r"--allow-egress api\.example\.com --allow-egress 10\.0\.0\.7", line), line


def test_the_html_reports_replay_line_reads_the_same_from_meta() -> None:
    """The HTML report builds its lines from meta.json (harness/report/html_run.py): the adapter, the
    convention and the hosts are there too (it dropped the adapter before)."""
    from killpoint.report.html_run import replay_for  # noqa: PLC0415

    meta = {"worker_cmd": "python w.py {run_id}", "adapter": "langgraph", "exit_codes": "killpoint",
            "allow_egress": ["api.example.com"]}
    line = replay_for("crash-points", {"schedule": TWICE, "seed": None}, meta)
    for flag in ("--adapter langgraph", "--exit-codes killpoint", "--allow-egress api.example.com",
                 f"--schedule '{TWICE}'"):
        assert flag in line, line
