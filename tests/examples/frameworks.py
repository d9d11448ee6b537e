"""What the LangGraph and DBOS example tests share: the CLI against a framework's example worker, in a
sandbox, and the checks of what it printed."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from collections import Counter
from pathlib import Path

from killpoint.cli.args import default_jobs
from tests.helpers import REPO
from tests.helpers.checks import describe, failing_checkers
from tests.helpers.sandbox import Sandbox

SCENARIO_LINE = re.compile(r"^(PASS|FAIL|UNKNOWN|EXPECTED|SKIP|ERROR)\s+(\S+)\s+\d+ schedules", re.MULTILINE)
REPLAY_LINE = re.compile(r"^reproduce the first failure with:\n  (killpoint replay .+)$", re.MULTILINE)


def worker_cmd(example: str, keyed: bool) -> str:
    """The `--worker-cmd` of an example worker (examples/<example>), bare or keyed."""
    path = REPO / "examples" / example
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(path))} {{run_id}}" + (" --keyed" if keyed else "")


def cli(box: Sandbox, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    return box.run(*args, "--out", str(box.out), timeout=timeout)


def replay_argv(stdout: str) -> list[str]:
    """The printed replay line of the first failure, as argv without the leading `killpoint`."""
    m = REPLAY_LINE.search(stdout)
    assert m, f"no replay line in:\n{stdout[-3000:]}"
    argv = shlex.split(m.group(1))
    assert argv[:2] == ["killpoint", "replay"]
    return argv[1:]


def assert_duplicate_found(box: Sandbox, adapter: str, example: str) -> None:
    """`explore --exhaustive --actions kill` on the bare variant fails exactly_once, and the replay line it
    prints (which names --worker-cmd and --adapter) fails the same way when run as printed."""
    proc = cli(box, "explore", "--scenario", "crash-points", "--exhaustive", "--actions", "kill",
               "--adapter", adapter, "--worker-cmd", worker_cmd(example, keyed=False))
    assert proc.returncode == 1, describe(proc)
    assert "exactly_once" in failing_checkers(proc.stdout), describe(proc)
    assert "effects done twice" in proc.stdout, describe(proc)
    argv = replay_argv(proc.stdout)
    assert "--worker-cmd" in argv and argv[argv.index("--adapter") + 1] == adapter, argv
    again = cli(box, *argv)
    assert again.returncode == 1, describe(again)
    assert "exactly_once" in failing_checkers(again.stdout) and "effects done twice" in again.stdout, describe(again)
    assert not box.survivors(), box.survivors()


KEYED_PASS = ("crash-points", "db-crash", "flaky-services", "zombie-worker", "deploy-drain")
"""Scenarios a correct (keyed) framework example must pass."""
KEYED_SKIP = ("fleet", "stalled-sweep", "schema-upgrade", "stored-checkpoints", "rollback-refusal",
              "non-idempotent-downstream")
"""Scenarios that do not apply to a black-box worker: skipped, with their reason."""


def most_at_once(run_dir: Path, scenario: str) -> int:
    """The most runs of `scenario` (ids `<scenario>-N`) going at once in a run directory's history, each from
    its first event to its last."""
    spans: dict[str, list[float]] = {}
    for line in (run_dir / "history.jsonl").read_text().splitlines():
        event = json.loads(line)
        run_id = event.get("run_id") or ""
        if re.fullmatch(rf"{re.escape(scenario)}-\d+(\.\w+)?", run_id):
            spans.setdefault(run_id, []).append(event["t"])
    edges = sorted([(min(t), 1) for t in spans.values()] + [(max(t), -1) for t in spans.values()])
    most = going = 0
    for _, step in edges:
        going += step
        most = max(most, going)
    return most


def scenario_spans(run_dir: Path) -> dict[str, list[tuple[float, float]]]:
    """Each scenario's runs in a run directory's history (ids `<scenario>-N`), each (first event, last event)."""
    times: dict[str, list[float]] = {}
    for line in (run_dir / "history.jsonl").read_text().splitlines():
        event = json.loads(line)
        match = re.fullmatch(r"([a-z-]+?)-\d+(\.\w+)?", event.get("run_id") or "")
        if match and match.group(1) != "baseline":
            times.setdefault(event["run_id"], []).append(event["t"])
    out: dict[str, list[tuple[float, float]]] = {}
    for run_id, ts in times.items():
        out.setdefault(re.sub(r"-\d+(\.\w+)?$", "", run_id), []).append((min(ts), max(ts)))
    return out


def overlapped(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> bool:
    """Whether a run of `a` was going while a run of `b` was."""
    return any(x0 < y1 and y0 < x1 for x0, x1 in a for y0, y1 in b)


def assert_keyed_passes(box: Sandbox, adapter: str, example: str) -> dict[str, str]:
    """`killpoint run` on the keyed variant: every scenario PASS or SKIP (with its reason), no UNKNOWN, exit
    0; returns {scenario: outcome}. On more than one core, the trials of `deploy-drain` and (where the
    workflow asks a model) `sampling-model` ran side by side (the worker is forked from servers that preloaded
    its framework: nothing holds them to one at a time), and so did the side-by-side scenarios, `db-crash`
    beside none. A workflow that asks no model skips `sampling-model`, saying it does not apply."""
    proc = cli(box, "run", "--seed", "1", "--budget", "2", "--adapter", adapter,
               "--worker-cmd", worker_cmd(example, keyed=True), timeout=3600)
    outcomes = {name: outcome for outcome, name in SCENARIO_LINE.findall(proc.stdout)}
    assert proc.returncode == 0, describe(proc)
    assert outcomes and set(outcomes.values()) <= {"PASS", "SKIP"}, outcomes
    assert "UNKNOWN" not in proc.stdout, describe(proc)
    for name in KEYED_PASS:
        assert outcomes.get(name) == "PASS", (name, outcomes)
    for name in KEYED_SKIP:
        assert outcomes.get(name) == "SKIP", (name, outcomes)
    if default_jobs() > 1:
        (run_dir,) = run_dirs(box)
        for name in ("deploy-drain", "sampling-model"):
            assert outcomes[name] == "SKIP" or most_at_once(run_dir, name) >= 2, name
        spans = scenario_spans(run_dir)  # scenarios side by side (`run.side_by_side`); db-crash alone
        beside = [name for name in spans if name != "db-crash"]
        assert any(overlapped(spans[a], spans[b]) for a in beside for b in beside if a < b), sorted(spans)
        for name, runs in spans.items():
            assert name == "db-crash" or not overlapped(spans["db-crash"], runs), name
    assert not box.survivors(), box.survivors()
    return outcomes


def run_dirs(box: Sandbox) -> list[Path]:
    return sorted(p for p in box.out.iterdir() if p.is_dir())


ONCE = ("crash-points", "flaky-services", "mixed-faults", "zombie-worker")
"""Scenarios whose trial is a function of its schedule: `run` judges each of their schedules once (its
random part draws none the sweep ran, nor any twice: `faults.schedule.distinct`)."""


def assert_each_schedule_once(verdicts: list[dict]) -> None:
    """No scenario of `ONCE` in a run's verdicts.json ran a schedule twice (shrinking's and the failure
    store's trials aside: they re-run a failure on purpose)."""
    for r in verdicts:
        if r["scenario"] in ONCE:
            ran = [t["schedule"] for t in r["trials"] if not t.get("shrunk_from") and not t.get("remembered")]
            assert ran and len(set(ran)) == len(ran), (r["scenario"], Counter(ran).most_common(3))
