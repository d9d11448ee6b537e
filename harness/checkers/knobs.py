"""A run's recorded `options`, told apart by what they are. Pure.

The `run.evidence` event keeps, in one JSON object `options` (as the run driver and the scenarios write
it), four different things; `split(options)` reads them apart:

1. `Knobs`: what the run was driven with that a checker or its replay line reads (`grace`, `exit_codes`,
   `time_budget`);
2. the baseline's volatile fields (`volatile`): what differed between two crash-free runs, left out of
   every comparison with it;
3. `Replay`: how the trial was asked for, which its replay line repeats (`explicit`, `worker_cmd`,
   `adapter`, `effects`);
4. every other key: the facts a scenario recorded for its own checkers and summary (`seeded_raw`,
   `drain_expect`, `takers`...), as a read-only mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

KNOB_KEYS = ("grace", "exit_codes", "time_budget")
VOLATILE_KEY = "volatile"
REPLAY_KEYS = ("explicit", "worker_cmd", "adapter", "effects", "allow_egress", "skip_checkers")
EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True)
class Knobs:
    """The knobs a run was driven with that its checkers judge by."""

    grace: float | None = None
    """Seconds between SIGTERM and SIGKILL (`--grace`)."""
    exit_codes: str = "killpoint"
    """The exit-code convention the worker is held to: `killpoint` or `none` (`--exit-codes`)."""
    time_budget: float | None = None
    """Seconds a run may take before it is judged not done (`--run-timeout`; None in older histories)."""


@dataclass(frozen=True)
class Replay:
    """How a trial was asked for: what its replay line must repeat."""

    explicit: bool = False
    """The schedule was written by a user (a fault that never fires leaves the trial unknown)."""
    worker_cmd: str | None = None
    """The black-box worker command (`--worker-cmd`), if any."""
    adapter: str | None = None
    """The adapter that black-box worker was read through (`--adapter`)."""
    effects: Mapping[str, str] | None = None
    """The effect proxies, name -> URL (`--effect`)."""
    allow_egress: tuple[str, ...] = ()
    """The hosts its worker was let reach (`--allow-egress`)."""
    skip_checkers: tuple[str, ...] = ()
    """The checkers its session left out of every judgement (`--skip-checker`), sorted."""


def split(options: Mapping[str, Any]) -> tuple[Knobs, frozenset[str], Replay, Mapping[str, Any]]:
    """The knobs, the volatile fields, the replay metadata and the scenario's extras of `options`."""
    knobs = Knobs(grace=options.get("grace"), exit_codes=options.get("exit_codes", "killpoint"),
                  time_budget=options.get("time_budget"))
    volatile = frozenset(options.get(VOLATILE_KEY) or ())
    replay = Replay(explicit=bool(options.get("explicit")), worker_cmd=options.get("worker_cmd"),
                    adapter=options.get("adapter"), effects=options.get("effects"),
                    allow_egress=tuple(options.get("allow_egress") or ()),
                    skip_checkers=tuple(options.get("skip_checkers") or ()))
    known = {*KNOB_KEYS, VOLATILE_KEY, *REPLAY_KEYS}
    extra = {k: v for k, v in options.items() if k not in known}
    return knobs, volatile, replay, MappingProxyType(extra) if extra else EMPTY
