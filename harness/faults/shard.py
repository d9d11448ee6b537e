"""`--shard K/N`: the schedules of a run split across N CI jobs, by trial (not by scenario), by estimated cost.

1. `parse("K/N")` checks 1 <= K <= N (a UsageError naming the fix otherwise).
2. A plan every machine computes alike (a scenario's exhaustive or random schedules, a refusal's kinds,
   a drain's schedules and graces: a pure function of the agent, the scenario and the seed) is dealt by `Shard.deal(scenario, names)`: each shard's quota of the plan's n trials is the floor of
   its weight's share, and the trials left over go one each to shards drawn with the chance of their
   share's fraction (so over many plans every shard gets its share: a low-weight shard is not always
   rounded down, nor the first of the full ones always up); then the trials, in plan order, go round the
   shards by smooth weighted round robin over the quotas, ties in an order of the shards drawn from
   SHA-256 of the scenario and the plan's names. So each shard gets its weight's share of every plan
   within one trial (with equal weights, floor or ceil of n/N; neighbours in a plan, which tend to cost
   alike, go to different shards), every trial lands in exactly one shard, and the N shards together run
   the whole plan; which one a trial gets is a function of the plan, the same on every machine. The deal is
   integer arithmetic; the weights (step 4) are IEEE doubles rounded to integers, the same operations in
   the same order on every machine.
3. A plan only this machine has (its stored failures, its kept checkpoints) cannot be dealt alike on
   every machine, so each of its trials belongs to shard `1 + SHA-256(scenario | label | seed) mod N`
   (`Shard.owns`): a pure function of the trial's name.
4. Whole units (a negative control, judged over all its trials; a scenario whose plan is one trial: a
   fleet, a set of concurrent runs) cannot be split. `Shard.placing(units, rest)` puts them, costliest
   first, each on the least loaded shard (ties from a shard drawn from their names), and `Shard.weighted(held, rest)` gives the weights that even
   out the shards' estimated seconds around them: water-filling, each shard's weight the seconds of
   `rest` it should still get (a shard holding more than its even share gets none). Every shard computes
   both from the same selection, so every shard places and deals alike; `holder(scenario)` is where a
   unit runs (by the hash of its name when nothing placed it: a command of one scenario).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from killpoint.errors import UsageError
from killpoint.faults.schedule import Schedule

SCALE = 1000
"""Weights are integers: a full share is SCALE."""


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def trial_name(label: Schedule | str, seed: int | None = None) -> str:
    """The name a trial is dealt and owned by: its label (schedule or the scenario's own name) and seed."""
    return f"{label}|{'' if seed is None else seed}"


@dataclass(frozen=True)
class Shard:
    """Shard `index` (from 1) of `count`; `weights`: each shard's share of a dealt plan (SCALE = a full one;
    empty: all equal)."""

    index: int
    count: int
    weights: tuple[int, ...] = ()
    placed: tuple[tuple[str, int], ...] = ()
    """Whole units placed by `Shard.placing`: (scenario, the shard that runs all of it)."""

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def owns(self, scenario: str, label: Schedule | str, seed: int | None = None) -> bool:
        """Flow step 3: whether this shard runs the trial of `scenario` named `label` (its schedule, or the
        scenario's own name for it), with its seed, if any, of a plan only this machine has."""
        return self.owner(scenario, label, seed) == self.index

    def owner(self, scenario: str, label: Schedule | str, seed: int | None = None) -> int:
        """Flow step 3: the shard (from 1) that runs the trial `owns` asks about."""
        return 1 + _digest(f"{scenario}|{trial_name(label, seed)}") % self.count

    def deal(self, scenario: str, names: Sequence[str]) -> list[int]:
        """Flow step 2: the shard (from 1) of each trial of a plan of `scenario` whose trials are named
        `names` (`trial_name`), in plan order."""
        n, weights = len(names), list(self.weights) or [SCALE] * self.count
        key = f"{scenario}|{n}|" + "\n".join(names)
        order = sorted(range(self.count), key=lambda j: _digest(f"{key}|{j}"))  # a permutation drawn from the plan
        total = sum(weights)
        quota = [n * w // total for w in weights]
        # the trials left over go one each to shards drawn with the chance of their fractions (systematic
        # sampling: `n - sum(quota)` points a whole `total` apart, from an offset drawn from the plan, on
        # the fractions laid end to end in `order`), so that over many plans a shard's count is its share
        offset, start = _digest(f"{key}|offset") % total, 0
        for j in order:
            part = n * weights[j] % total
            quota[j] += (start + part - 1 - offset) // total - (start - 1 - offset) // total
            start += part
        current, owners = [0] * self.count, []
        for _ in names:  # smooth weighted round robin by the quotas: exactly quota[j] each, neighbours apart
            for j in range(self.count):
                current[j] += quota[j]
            best = max(order, key=lambda j: current[j])  # the first of the highest, in `order`
            current[best] -= n
            owners.append(best + 1)
        return owners

    def holder(self, scenario: str) -> int:
        """Flow step 4: the shard that runs all of `scenario`, a whole unit: where `placing` put it, else
        `owner(scenario, "negative-control")`."""
        return dict(self.placed).get(scenario) or self.owner(scenario, "negative-control")

    def placing(self, units: Mapping[str, float], rest: float) -> Shard:
        """Flow step 4: this shard with the whole `units` (scenario -> estimated seconds) placed, the
        costliest first, each on the least loaded shard (ties: from a shard drawn from their names), and
        the weights that even out the `rest` around them (`weighted`)."""
        loads = [0.0] * self.count
        start = _digest("\n".join(sorted(units))) % self.count
        order = [(start + j) % self.count for j in range(self.count)]
        placed = []
        for name in sorted(units, key=lambda n: (-units[n], n)):
            k = min(order, key=lambda j: loads[j])
            loads[k] += units[name]
            placed.append((name, k + 1))
        weighed = self.weighted({k + 1: load for k, load in enumerate(loads)}, rest)
        return Shard(self.index, self.count, weighed.weights, tuple(sorted(placed)))

    def weighted(self, held: Mapping[int, float], rest: float) -> Shard:
        """Flow step 4: this shard with the weights that give the shards in `held` (shard index -> estimated
        seconds of the whole units it holds) less of the `rest` (estimated seconds of everything dealt)."""
        pre = [max(0.0, float(held.get(k, 0.0))) for k in range(1, self.count + 1)]
        if rest <= 0 or not any(pre):
            return Shard(self.index, self.count)
        lo, hi = min(pre), max(pre) + rest
        for _ in range(100):  # the level L with sum(max(0, L - pre)) == rest, by bisection
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if sum(max(0.0, mid - p) for p in pre) < rest else (lo, mid)
        share = [max(0.0, hi - p) for p in pre]
        top = max(share)
        return Shard(self.index, self.count, tuple(round(SCALE * s / top) for s in share))


def parse(text: str) -> Shard:
    """Flow step 1: `K/N` as a Shard."""
    m = re.fullmatch(r"\s*([0-9]+)\s*/\s*([0-9]+)\s*", text or "")
    if not m or not 1 <= int(m[1]) <= int(m[2]):
        raise UsageError("bad-shard", f"--shard {text!r} is not K/N with 1 <= K <= N",
                         "write --shard 2/4 for the second of four shards")
    return Shard(int(m[1]), int(m[2]))
