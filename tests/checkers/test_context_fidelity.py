"""context_fidelity judges the tool traffic of model requests (issue 22, item 6), built from the typed
`model.request` records the fakes journal: a resumed agent that lost a tool result, or resent a tool call
whose effect had already happened, is found and said as such; the tools offered are part of a request's
identity; a request missing from a strict cassette is named by its digest. The same traffic is read in
the shapes of all three model APIs."""

from __future__ import annotations

from typing import Any

import pytest

from killpoint.checkers import Evidence, run_checkers
from killpoint.checkers.context import tool_traffic
from killpoint.events import ModelRequest

ASK = {"role": "user", "content": "Order A-17 arrived broken. Please refund it."}
CALL = {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "issue_refund",
                                          "input": {"order_id": "A-17", "amount": 4200}}]}
RESULT = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "refunded"}]}
THANKS = {"role": "user", "content": "Thanks; anything else?"}
TOOLS = ["issue_refund"]


def request(run_id: str, order: int, messages: list[dict], tools: list[str] = TOOLS, **more: Any) -> ModelRequest:
    """A `model.request` record as the Anthropic fake journals it."""
    return ModelRequest(run_id=run_id, record={
        "order": order, "run_id": run_id, "service": "model", "api": "messages", "model": "claude-haiku-4-5",
        "system": None, "messages": messages, "tools": tools, "tool_calls": [], "outcome": "applied",
        "request_digest": f"{order:016x}", **more})


def evidence(run_id: str, records: list[ModelRequest]) -> Evidence:
    return Evidence(run_id=run_id, model_requests=[dict(e.record or {}) for e in records])


def crash_free() -> Evidence:
    return evidence("baseline-1", [request("baseline-1", 1, [ASK]),
                                   request("baseline-1", 2, [ASK, CALL, RESULT]),
                                   request("baseline-1", 3, [ASK, CALL, RESULT, {"role": "assistant",
                                                                                 "content": "done"}, THANKS])])


def judge(records: list[ModelRequest]) -> Any:
    (verdict,) = run_checkers(["context_fidelity"], evidence("r-1", records), crash_free())
    return verdict


def test_the_same_tool_loop_after_a_crash_passes():
    replayed = [request("r-1", 1, [ASK]), request("r-1", 2, [ASK]), request("r-1", 3, [ASK, CALL, RESULT])]
    assert judge(replayed).outcome == "pass"


def test_a_resumed_agent_that_lost_a_tool_result_is_found():
    lost = [request("r-1", 1, [ASK]),
            request("r-1", 2, [ASK, CALL, {"role": "assistant", "content": "done"}, THANKS])]
    verdict = judge(lost)
    assert verdict.outcome == "fail" and "a tool result lost" in verdict.reason
    assert any("lost the tool result of issue_refund (toolu_1)" in line for line in verdict.evidence), verdict


def test_a_resumed_agent_that_resent_a_tool_call_after_its_effect_is_found():
    resent = [request("r-1", 1, [ASK]), request("r-1", 2, [ASK, CALL, RESULT, CALL, RESULT])]
    verdict = judge(resent)
    assert verdict.outcome == "fail" and "a tool call resent after its effect" in verdict.reason
    assert any("resends the tool call issue_refund (toolu_1)" in line for line in verdict.evidence), verdict


def test_the_tools_offered_are_part_of_the_request():
    fewer = [request("r-1", 1, [ASK], tools=[])]
    verdict = judge(fewer)
    assert verdict.outcome == "fail" and "never sent" in verdict.reason


def test_a_request_missing_from_the_cassette_is_named():
    missing = [request("r-1", 1, [ASK]),
               request("r-1", 2, [ASK, CALL, RESULT], outcome="rejected", cassette="missing",
                       error="request 0000000000000002 (messages, model claude-haiku-4-5) is not in the cassette "
                             "answers.jsonl")]
    verdict = judge(missing)
    assert verdict.outcome == "fail" and verdict.reason == "request 0000000000000002 is not in the cassette"
    assert "answers.jsonl" in verdict.evidence[0]


@pytest.mark.parametrize("messages", [
    [ASK, CALL, RESULT],  # Anthropic Messages
    [ASK, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "toolu_1", "type": "function", "function": {"name": "issue_refund", "arguments": "{}"}}]},
     {"role": "tool", "tool_call_id": "toolu_1", "content": "refunded"}],  # Chat Completions
    [ASK, {"type": "function_call", "call_id": "toolu_1", "name": "issue_refund", "arguments": "{}"},
     {"type": "function_call_output", "call_id": "toolu_1", "output": "refunded"}],  # Responses
], ids=["messages", "chat.completions", "responses"])
def test_tool_traffic_is_read_from_every_api(messages: list[dict]):
    traffic = tool_traffic(messages)
    assert traffic.calls == [("toolu_1", "issue_refund")] and traffic.results == {"toolu_1"}
    assert traffic.unanswered() == [] and traffic.resent == []
    lost = tool_traffic([*messages[:2], THANKS])
    assert lost.unanswered() == [("toolu_1", "issue_refund")]
