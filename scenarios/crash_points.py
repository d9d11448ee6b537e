"""crash-points: every single fault (each step, each kill point, kill and term), then random
multi-fault schedules from the run's seed. Judged by every crash checker."""

from __future__ import annotations

from killpoint.run.scenario import Scenario


class CrashPoints(Scenario):
    name = "crash-points"
    side_by_side = True  # its trials are runs of their own ids, their faults reach only them
    cost = 11.4  # seconds, reference agent, -j 1 (bench/shards.py)
    summary = "every single kill/term at every step and kill point, then random multi-fault schedules"
