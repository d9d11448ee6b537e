"""Window compaction before the checkpoint is written."""

from __future__ import annotations

from killpoint.reference_agent.compaction import compact, size
from tests.helpers.agents import AgentEnv, agent_fixture  # noqa: F401 (the `agent` fixture)


def conversation(turns: int) -> list[dict[str, str]]:
    window = [{"role": "user", "content": "the task " * 5}]
    for i in range(turns):
        window += [{"role": "assistant", "content": f"answer {i} " * 10},
                   {"role": "user", "content": f"question {i + 1} " * 10}]
    return [*window, {"role": "assistant", "content": "last answer"}]


def test_window_within_budget_is_kept_as_is() -> None:
    window = conversation(3)
    assert compact(window, size(window)) is window


def test_window_over_budget_keeps_the_task_and_the_latest_turns() -> None:
    window = conversation(10)
    budget = size(window) // 3
    compacted = compact(window, budget)
    assert size(compacted) <= budget
    assert compacted[0]["role"] == "user" and compacted[0]["content"].startswith(window[0]["content"])
    assert "[compacted: " in compacted[0]["content"]
    tail = compacted[1:]
    assert tail == window[len(window) - len(tail):] and tail[0]["role"] == "assistant"
    roles = [m["role"] for m in compacted]
    assert roles == ["user", "assistant"] * (len(roles) // 2)  # still alternating
    assert compact(window, budget) == compacted  # deterministic: a resumed run compacts the same way


def test_run_checkpoints_the_compacted_window(agent: AgentEnv) -> None:
    budget = 480  # between the compacted (449) and the full (519) final window
    worker = agent.run("r-c", KILLPOINT_WINDOW_BUDGET=budget)
    assert worker.proc.returncode == 0, worker.output
    window = agent.row("r-c")["data"]["window"]
    last = agent.model_requests("r-c")[-1]
    full = [*last["messages"], {"role": "assistant", "content": last["response_text"]}]
    assert size(full) > budget
    assert window == compact(full, budget) and size(window) <= budget


def test_repeated_compaction_counts_but_does_not_grow_the_note() -> None:
    window = conversation(10)
    budget = size(window) // 3
    once = compact(window, budget)
    more = [*once, {"role": "user", "content": "q " * 200}, {"role": "assistant", "content": "a " * 200}]
    twice = compact(more, budget)
    assert twice != more and size(twice) <= budget
    assert twice[0]["content"].count("[compacted: ") == 1
    dropped = len(window) - len(once) + len(more) - len(twice)
    assert f"[compacted: {dropped} earlier messages omitted" in twice[0]["content"]
