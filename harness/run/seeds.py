"""Base seeds like Hypothesis's: random unless the user fixes one, and always said.

1. `--seed N` fixes the base seed; without it `choose` draws one from the operating system's randomness
   (`secrets`), so each CI run tries other random schedules.
2. The chosen seed is printed when the run starts and again with every failure (`seed_line`), so any run
   can be repeated exactly with `--seed N`; it is recorded in meta.json and the JUnit properties.
"""

from __future__ import annotations

import secrets

SEED_BITS = 32


def choose(given: int | None) -> int:
    """The base seed: `given` when the user fixed one, else a fresh random one (flow step 1)."""
    return given if given is not None else secrets.randbelow(2**SEED_BITS)


def seed_line(seed: int, given: int | None) -> str:
    """What the run says about its base seed (flow step 2)."""
    how = "fixed by --seed" if given is not None else "random"
    return f"base seed {seed} ({how}; repeat this run with --seed {seed})"
