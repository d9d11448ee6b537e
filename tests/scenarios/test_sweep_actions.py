"""Every scenario's sweep injects whole actions, as a user would write them in a schedule."""

from __future__ import annotations

from types import SimpleNamespace

from killpoint.faults.points import problem
from killpoint.run.scenario import registry


def test_every_scenarios_sweep_injects_actions_as_written() -> None:
    """What `--exhaustive` and the base random plan inject are whole actions (`faults.points.problem` finds
    nothing wrong with each): a name that needs its argument (`clock`, whose jump needs its amount) is swept
    by its concrete forms (`Scenario.concrete`). A bare `clock` was injected as a kill that moves no clock,
    a trial labelled a clock jump that tested none."""
    everything = SimpleNamespace(actions=())
    for name, scenario in registry().items():
        actions = scenario.sweep_actions(everything)  # type: ignore[arg-type]
        assert all(problem(a) is None for a in actions), (name, actions)
    mixed = registry()["mixed-faults"].sweep_actions(everything)  # type: ignore[arg-type]
    assert {"clock+366d", "clock-1h", "kill", "term", "error", "drop"} <= set(mixed), mixed
    only_clock = registry()["mixed-faults"].sweep_actions(SimpleNamespace(actions=("clock",)))  # type: ignore[arg-type]
    assert only_clock == ("clock+366d", "clock-1h")
