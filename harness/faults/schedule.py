"""Fault schedules: `STEP:POINT:ACTION[@N]` lists, parsed, printed, generated from seeds and enumerated.

ACTION is a name of `faults.points` (`kill`, `term`, `stop`, `db-crash`, `drop`, `error`, `slow`, `overload`), a
clock jump `clock+N<unit>`/`clock-N<unit>` (unit `s`, `m`, `h`, `d`), or an outage `outage`/`outage=N`.
A schedule prints back to the text it was parsed from (`str(Schedule.parse(s)) == s` for canonical
text), and every generator here is a pure function of its arguments: the pseudo-random choices come
from SHA-256 of the seed, never from the interpreter's `random`, so a seed means the same schedule on
any machine and any Python.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from killpoint.errors import UsageError
from killpoint.faults.points import ACTION_NAMES, POINTS, base, fits, problem

StepPoints = Mapping[str, Sequence[str]]
"""For each step, the kill points it reaches (in a crash-free run), in order."""

_TOKEN = re.compile(r"^(?P<step>[^:@\s]+):(?P<point>[^:@\s]+):(?P<action>[^:@\s]+)(?:@(?P<nth>.*))?$")
"""Three colon-separated names and an optional @N. Only the shape is checked here: a misspelt step, point
or action parses, so the error can name the valid choices for the part that is wrong."""


ACTION_FORMS: tuple[str, ...] = tuple({"clock": "clock+N<s|m|h|d>", "outage": "outage[=N]"}.get(a, a)
                                      for a in ACTION_NAMES)
"""The actions as a schedule writes them (an error's fix lists these)."""


class ScheduleError(UsageError):
    """A schedule token that does not parse or names something that does not exist."""

    def __init__(self, token: str, problem: str, fix: str) -> None:
        super().__init__("bad-schedule", f"schedule token {token!r}: {problem}", fix)
        self.token = token


@dataclass(frozen=True, order=True, slots=True)
class Fault:
    """One fault: apply `action` the `nth` time `step` reaches `point` (counted across incarnations)."""

    step: str
    point: str
    action: str
    nth: int = 1

    def __str__(self) -> str:
        suffix = f"@{self.nth}" if self.nth != 1 else ""
        return f"{self.step}:{self.point}:{self.action}{suffix}"

    @classmethod
    def parse(cls, token: str, steps: Iterable[str] | None = None) -> Fault:
        """Parse one `STEP:POINT:ACTION[@N]`; with `steps`, the step must be one of them."""
        m = _TOKEN.match(token.strip())
        if not m:
            raise ScheduleError(token, "not of the form STEP:POINT:ACTION[@N]",
                                "write faults like email:effect.applied:kill or charge:step.start:term@2")
        step, point, action, nth_text = m["step"], m["point"], m["action"], m["nth"]
        known_steps = sorted(steps) if steps is not None else None
        if known_steps is not None and step not in known_steps:
            raise ScheduleError(token, f"unknown step {step!r}", f"use one of: {', '.join(known_steps)}")
        if point not in POINTS:
            raise ScheduleError(token, f"unknown point {point!r}", f"use one of: {', '.join(POINTS)}")
        if (wrong := problem(action)) is not None:
            raise ScheduleError(token, wrong, f"use one of: {', '.join(ACTION_FORMS)}")
        if not fits(action, point):
            valid = [p for p in POINTS if fits(action, p)]
            raise ScheduleError(token, f"action {action!r} cannot happen at {point!r}",
                                f"use {base(action)} at one of: {', '.join(valid)}")
        nth = 1
        if nth_text is not None:
            if not re.fullmatch(r"[0-9]+", nth_text) or int(nth_text) < 1:  # str.isdigit() accepts "²"
                raise ScheduleError(token, f"bad occurrence @{nth_text}", "N in @N is a whole number from 1")
            nth = int(nth_text)
        return cls(step, point, action, nth)


@dataclass(frozen=True, slots=True)
class Schedule:
    """An ordered list of faults; the empty schedule is the crash-free run."""

    faults: tuple[Fault, ...] = ()

    def __str__(self) -> str:
        return ",".join(str(f) for f in self.faults)

    def __len__(self) -> int:
        return len(self.faults)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # noqa: ANN401
        """How Hypothesis (and IPython) print a schedule, e.g. a falsifying example: its text, as code."""
        p.text(f"Schedule.parse({str(self)!r})")

    def __iter__(self) -> Iterator[Fault]:
        return iter(self.faults)

    @classmethod
    def parse(cls, text: str, steps: Iterable[str] | None = None) -> Schedule:
        """Parse comma-joined faults. Raises ScheduleError naming the bad token and the valid choices."""
        steps = list(steps) if steps is not None else None
        tokens = [t for t in (p.strip() for p in text.split(",")) if t]
        faults = tuple(Fault.parse(t, steps) for t in tokens)
        seen: set[tuple[str, str, int]] = set()
        for f in faults:
            if (f.step, f.point, f.nth) in seen:
                raise ScheduleError(str(f), "two faults at the same step, point and occurrence",
                                    "give the second one a different @N")
            seen.add((f.step, f.point, f.nth))
        return cls(faults)

    @classmethod
    def from_seed(cls, seed: int, step_points: StepPoints, *, actions: Sequence[str] = ("kill", "term"),
                  max_faults: int = 3, occurrences: Occurrences | None = None) -> Schedule:
        """A random schedule of 1..max_faults faults, a pure function of (seed, step_points, actions,
        occurrences).

        Each fault picks a step, a point that step reaches and that the action fits, and an action; where
        the crash-free run reached that point `k` > 1 times (`occurrences`: a loop's later passes), the
        first fault on it also picks which of the `k` (a point reached once draws nothing more, so its
        schedules are those of a seed without occurrences). A later fault on a (step, point) already used
        takes the next occurrence, which a resumed incarnation reaches again.
        """
        rng = _Rng(seed)
        candidates = [(s, p, a) for s in step_points for p in step_points[s] for a in actions if fits(a, p)]
        if not candidates:
            return cls()
        count = 1 + rng.below(max_faults)
        faults: list[Fault] = []
        used: dict[tuple[str, str], int] = {}
        for _ in range(count):
            step, point, action = candidates[rng.below(len(candidates))]
            faults.append(Fault(step, point, action, next_occurrence(rng, used, step, point, occurrences)))
        return cls(tuple(faults))


def next_occurrence(rng: _Rng, used: dict[tuple[str, str], int], step: str, point: str,
                    occurrences: Occurrences | None) -> int:
    """The occurrence a drawn fault on (`step`, `point`) takes, recorded in `used`: one past the last fault
    already there (which a resumed incarnation reaches again); else, where the crash-free run reached it
    `k` > 1 times, one of the `k` drawn from `rng`; else the first (nothing drawn: loop-free seeds unchanged)."""
    if (step, point) in used:
        nth = used[(step, point)] + 1
    else:
        reached = (occurrences or {}).get(step, {}).get(point, 1)
        nth = 1 + rng.below(reached) if reached > 1 else 1
    used[(step, point)] = nth
    return nth


def fault_budget(step_points: StepPoints) -> int:
    """The most faults one random schedule may hold: one per step the agent has, and never fewer than two
    (so a service fault and a process fault fit in a mixed one). Not a constant: a longer agent gets longer
    schedules."""
    return max(2, len(step_points))


Occurrences = Mapping[str, Mapping[str, int]]
"""How many times a step reached a point in a crash-free run, where more than once (a tool loop's model
calls, a batch of emails, parallel branches named alike); a point not in it was reached once."""

MAX_OCCURRENCES = 5
"""The occurrences of one step's point the exhaustive sweep faults at most (@1..@5): a loop of fifty model
calls would otherwise multiply the sweep by fifty for kills like the first ones."""


def exhaustive(step_points: StepPoints, actions: Sequence[str] = ("kill", "term"),
               occurrences: Occurrences | None = None) -> list[Schedule]:
    """Every single-fault schedule: each step x each point it reaches x each time it reaches it
    (`occurrences`, up to `MAX_OCCURRENCES`; once where not given) x each action that fits, in that order."""
    times = occurrences or {}
    return [Schedule((Fault(s, p, a, n),)) for s in step_points for p in step_points[s]
            for n in range(1, min(times.get(s, {}).get(p, 1), MAX_OCCURRENCES) + 1) for a in actions
            if fits(a, p)]


def random_schedules(base_seed: int, count: int, step_points: StepPoints, *,
                     actions: Sequence[str] = ("kill", "term"), max_faults: int = 3,
                     occurrences: Occurrences | None = None) -> list[tuple[int, Schedule]]:
    """`count` multi-fault schedules, each with its own seed derived from `base_seed` (seed, schedule)."""
    out = []
    for i in range(count):
        seed = derive_seed(base_seed, i)
        out.append((seed, Schedule.from_seed(seed, step_points, actions=actions, max_faults=max_faults,
                                             occurrences=occurrences)))
    return out


DRAWS_PER_SCHEDULE = 4
"""Seeds `distinct` may draw per schedule asked for (plus `DRAWS_SPARE`) before it gives up on finding more."""
DRAWS_SPARE = 64
DRAWS_WITHOUT_NEW = 1024
"""Seeds in a row that drew nothing new after which `distinct` stops early (a small space is used up)."""


def distinct(base_seed: int, count: int, draw: Callable[[int], Schedule], *,
             keep: Callable[[Schedule], bool] | None = None, besides: Iterable[Schedule] = (),
             most_draws: int | None = None) -> list[tuple[int, Schedule]]:
    """Up to `count` (seed, schedule) pairs of schedules that differ, for a scenario whose trial is a function
    of its schedule (the same schedule judged twice tests nothing the first trial did not):

    1. Seeds are drawn in order, `derive_seed(base_seed, i)` for i = 0, 1, ..., each standing for `draw(seed)`
       (so a kept seed still replays as its schedule).
    2. A schedule is kept unless `keep` refuses it, it is one of `besides` (schedules the session judged
       already, e.g. `run`'s exhaustive sweep), or a seed before it drew it.
    3. Drawing stops at `count` kept, after `most_draws` seeds (default `DRAWS_PER_SCHEDULE * count +
       DRAWS_SPARE`), or after `DRAWS_WITHOUT_NEW` seeds in a row kept none: an agent with few fault points
       has few distinct schedules, and then fewer than `count` come back.

    Pure, and the same on every machine (shards deal the same plan)."""
    limit = DRAWS_PER_SCHEDULE * count + DRAWS_SPARE if most_draws is None else most_draws
    seen = set(besides)
    out: list[tuple[int, Schedule]] = []
    i = last_new = 0
    while len(out) < count and i < limit and i - last_new < DRAWS_WITHOUT_NEW:
        seed = derive_seed(base_seed, i)
        i += 1
        schedule = draw(seed)
        if schedule in seen or (keep is not None and not keep(schedule)):
            continue
        seen.add(schedule)
        out.append((seed, schedule))
        last_new = i
    return out


def derive_seed(base_seed: int, index: int) -> int:
    """A child seed, stable across machines: the first 6 bytes of SHA-256("base:index")."""
    return int.from_bytes(hashlib.sha256(f"{base_seed}:{index}".encode()).digest()[:6], "big")


class _Rng:
    """A counter-mode SHA-256 stream: the same seed draws the same numbers everywhere."""

    def __init__(self, seed: int) -> None:
        self._seed = seed
        self._counter = 0

    def below(self, n: int) -> int:
        """A number in [0, n) (n >= 1); the modulo bias of 64 random bits is negligible here."""
        digest = hashlib.sha256(f"killpoint:{self._seed}:{self._counter}".encode()).digest()
        self._counter += 1
        return int.from_bytes(digest[:8], "big") % n
