"""`killpoint run` runs its side-by-side scenarios at once and changes nothing a user reads but the order in
which different scenarios' lines interleave: each scenario's lines, run ids, verdicts and summary line are
those of `-j 1`; a scenario that must run alone (`db-crash`: it kills the server every run shares) overlaps no
other's runs.

The agent is Acme's refund agent (examples/refund_agent): other step names (decide, refund, notify, record),
a table of its own, no model call.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cli.test_jobs import normalised_stdout, normalised_verdicts
from tests.helpers.checks import describe
from tests.helpers.sandbox import Sandbox

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = ("crash-points", "zombie-worker", "db-crash")
PROGRESS_COUNT = re.compile(r"^[\w-]+: \d+/\d+ trials, ")  # a count with its elapsed time: not a trial's line


def spans(run_dir: Path) -> dict[str, list[tuple[float, float]]]:
    """Each scenario's runs (ids `<scenario>-N`), each from its first event to its last."""
    times: dict[str, list[float]] = {}
    for line in (run_dir / "history.jsonl").read_text().splitlines():
        event = json.loads(line)
        if re.fullmatch(rf"({'|'.join(SCENARIOS)})-\d+", event.get("run_id") or ""):
            times.setdefault(event["run_id"], []).append(event["t"])
    out: dict[str, list[tuple[float, float]]] = {}
    for run_id, ts in times.items():
        out.setdefault(run_id.rsplit("-", 1)[0], []).append((min(ts), max(ts)))
    return out


def overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> bool:
    return any(x0 < y1 and y0 < x1 for x0, x1 in a for y0, y1 in b)


def lines_of(stderr: str, scenario: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith(f"{scenario}: ") and not PROGRESS_COUNT.match(ln)]


@pytest.mark.slow  # two CLI runs of three scenarios each
def test_side_by_side_scenarios_give_what_one_at_a_time_gives(sandbox: Sandbox) -> None:
    seen = {}
    for j in ("1", "2"):
        out = sandbox.out / f"j{j}"
        proc = sandbox.run("run", "--seed", "2", "--steps", "acme_refunds.steps",
                                *(a for sc in SCENARIOS for a in ("--scenario", sc)),
                                "--actions", "kill,stop,db-crash", "--budget", "600", "-j", j, "--no-store",
                                "--out", str(out), path_first=(REPO / "examples" / "refund_agent",))
        assert proc.returncode == 0, describe(proc)
        (run_dir,) = list(out.iterdir())
        seen[j] = (normalised_stdout(proc.stdout, run_dir), proc.stderr, normalised_verdicts(run_dir), spans(run_dir))
    (out1, err1, verdicts1, spans1), (out2, err2, verdicts2, spans2) = seen["1"], seen["2"]
    assert out2 == out1  # the summary (in the order the scenarios were named), the seed line
    assert verdicts2 == verdicts1  # run ids, schedules, seeds, every checker's outcome and reason
    for sc in SCENARIOS:
        assert lines_of(err2, sc) == lines_of(err1, sc) and len(lines_of(err1, sc)) > 5, sc
    assert not overlap(spans1["crash-points"], spans1["zombie-worker"])  # -j 1: one scenario at a time
    assert overlap(spans2["crash-points"], spans2["zombie-worker"])  # -j 2: side by side
    for other in ("crash-points", "zombie-worker"):
        assert not overlap(spans2["db-crash"], spans2[other]), other  # the server's crashes reach no one else
    assert sandbox.survivors() == [] and sandbox.leftover_dirs() == []
