"""A world as harsh as production (issue 23, classes 3-5): the figures of the new gallery and of the reference
agent under the new scenarios.

- `--plain BUDGET`: for each mutant of shared-account, sampling-model and concurrent-runs, whether a plain
  `killpoint run --steps MUTANT --seed S --budget BUDGET` (every scenario) exits 1 and with which checkers
  (`bench/detection.py`'s `plain`); one whole run each, slow.
- `--reference N`: the reference agent and the correct lookalikes under `killpoint explore --random N` of
  each new scenario (sampling-model: N schedules, each a sampled run; shared-account: N cycles of 3 runs;
  concurrent-runs: N pairs of sets of 3 runs): trials and false verdicts (a trial that did not pass).

    python bench/harsh_world.py --reference 100 --seed 1
    python bench/harsh_world.py --plain 10 --seed 1

Run it from the repository root; each measurement is a fresh process with its own Postgres.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from detection import plain  # noqa: E402

from tests.gallery.mutants import MUTANTS  # noqa: E402

SCENARIOS = ("shared-account", "sampling-model", "concurrent-runs")
CORRECT = {"shared-account": "tests.gallery.variants.invoice_key", "sampling-model": "tests.gallery.variants.decision_memo",
           "concurrent-runs": "tests.gallery.variants.balance_in_txn"}
REFERENCE = "killpoint.reference_agent.invoice_agent"
SUMMARY = re.compile(r"^(PASS|FAIL|UNKNOWN|SKIP)\s+(\S+)\s+(\d+) schedules", re.M)
OUTCOME = re.compile(r" -> (pass|fail|unknown)\s*$", re.M)


def explore(scenario: str, steps: str, count: int, seed: int) -> tuple[int, int, float]:
    """(trials, trials that did not pass, seconds) of `explore --scenario S --random N` on `steps`."""
    with tempfile.TemporaryDirectory(prefix="killpoint-harsh-") as tmp:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "killpoint.cli.main", "explore", "--scenario", scenario,
                               "--random", str(count), "--seed", str(seed), "--steps", steps],
                              capture_output=True, text=True, cwd=tmp, env=env, stdin=subprocess.DEVNULL, timeout=7200)
        took = time.monotonic() - started
    lines = [ln for ln in proc.stderr.splitlines() if OUTCOME.search(ln)]  # progress lines go to stderr
    runs = [ln for ln in lines if "random [" not in ln] or lines  # a run's own line where the scenario says one
    outcomes = [OUTCOME.search(ln).group(1) for ln in runs]
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{scenario} on {steps}: exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return len(outcomes), sum(1 for o in outcomes if o != "pass"), took


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--plain", type=float, default=None, metavar="BUDGET")
    p.add_argument("--reference", type=int, default=None, metavar="N")
    args = p.parse_args(argv)
    if args.reference:
        print("| agent | scenario | trials | not passed | seconds |\n| --- | --- | --- | --- | --- |")
        for scenario in SCENARIOS:
            for steps in (REFERENCE, CORRECT[scenario]):
                trials, bad, took = explore(scenario, steps, args.reference, args.seed)
                print(f"| {steps.rsplit('.', 1)[1]} | {scenario} | {trials} | {bad} | {took:.0f} |", flush=True)
    if args.plain is not None:
        print("| mutant | scenario | caught by a plain `killpoint run --steps` |\n| --- | --- | --- |")
        for m in (m for m in MUTANTS if m.scenario in SCENARIOS):
            print(f"| {m.name} | {m.scenario} | {plain(m, args.seed, args.plain)} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
