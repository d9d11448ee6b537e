"""`--shard K/N`: the schedules of a run split across N CI jobs, by schedule (not by scenario).

1. `parse("K/N")` checks 1 <= K <= N (a UsageError naming the fix otherwise).
2. A trial belongs to shard `1 + SHA-256(scenario | label | seed) mod N`, its label being its schedule (or,
   for a scenario that builds its own plan, the name it gives the trial: a fleet's schedule, a refusal's
   kind, a drain's schedule and grace): a pure function of the trial's name, so every machine agrees,
   every trial lands in exactly one shard, and the N shards together run the whole set; one slow
   scenario's trials are spread over all shards.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from killpoint.errors import UsageError
from killpoint.faults.schedule import Schedule


@dataclass(frozen=True)
class Shard:
    """Shard `index` (from 1) of `count`."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def owns(self, scenario: str, label: Schedule | str, seed: int | None = None) -> bool:
        """Flow step 2: whether this shard runs the trial of `scenario` named `label` (its schedule, or the
        scenario's own name for it), with its seed, if any."""
        text = f"{scenario}|{label}|{'' if seed is None else seed}"
        digest = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
        return digest % self.count == self.index - 1


def parse(text: str) -> Shard:
    """Flow step 1: `K/N` as a Shard."""
    m = re.fullmatch(r"\s*([0-9]+)\s*/\s*([0-9]+)\s*", text or "")
    if not m or not 1 <= int(m[1]) <= int(m[2]):
        raise UsageError("bad-shard", f"--shard {text!r} is not K/N with 1 <= K <= N",
                         "write --shard 2/4 for the second of four shards")
    return Shard(int(m[1]), int(m[2]))
