"""`cost_accounted` judges the recorded cost against the witnesses: the usage the model fake saw for the
answers the agent kept, priced by the table of `killpoint.reference_agent.pricing`, within rounding. The
mutant `tests/gallery/mutants/misprices.py` (caught through the CLI in tests/checkers/test_mutants.py) is
wrong in every run; here the rule itself, on hand-made evidence."""

from __future__ import annotations

from killpoint.checkers import Evidence
from killpoint.checkers.outcome import cost_accounted
from killpoint.reference_agent import pricing

PLAN = {"order": 1, "model": "claude-sonnet-4-6", "request_digest": "d-plan", "outcome": "applied",
        "usage": {"input_tokens": 64, "output_tokens": 9}}
VALIDATE = {"order": 2, "model": "claude-sonnet-4-6", "request_digest": "d-validate", "outcome": "applied",
            "usage": {"input_tokens": 127, "output_tokens": 9}}
TRUE_COST = 0.000843  # (64 + 127) * 3 / 1e6 + (9 + 9) * 15 / 1e6


def run(cost: float | None, *requests: dict) -> Evidence:
    final: dict = {"cursor": "done", "status": "done"}
    if cost is not None:
        final["cost_usd"] = cost
    return Evidence("r", final=final, model_requests=list(requests))


def test_the_table_prices_the_fake_usage_as_the_agent_does() -> None:
    total = pricing.cost_usd(PLAN["model"], PLAN["usage"]) + pricing.cost_usd(VALIDATE["model"], VALIDATE["usage"])
    assert abs(total - TRUE_COST) < 1e-12


def test_the_cost_of_the_kept_answers_passes_and_a_replayed_request_counts_once() -> None:
    assert cost_accounted(run(TRUE_COST, PLAN, VALIDATE), None).outcome == "pass"
    replayed = {**VALIDATE, "order": 3}  # the same request again after a crash: the same answer, kept once
    failed_try = {**VALIDATE, "order": 4, "request_digest": "d-other", "outcome": "injected-error", "usage": None}
    assert cost_accounted(run(TRUE_COST, PLAN, VALIDATE, replayed, failed_try), None).outcome == "pass"
    assert cost_accounted(run(TRUE_COST + 2e-9, PLAN, VALIDATE), None).outcome == "pass"  # rounding per call


def test_a_cost_wrong_in_every_run_fails_even_against_an_equal_baseline() -> None:
    wrong = 0.00117
    verdict = cost_accounted(run(wrong, PLAN, VALIDATE), run(wrong, PLAN, VALIDATE))
    assert verdict.outcome == "fail"
    assert "0.001170000" in verdict.reason and "0.000843000" in verdict.reason
    billed_twice = cost_accounted(run(TRUE_COST + pricing.cost_usd(VALIDATE["model"], VALIDATE["usage"]),
                                      PLAN, VALIDATE, {**VALIDATE, "order": 3}), None)
    assert billed_twice.outcome == "fail"


def test_without_priced_witnesses_the_crash_free_run_is_the_reference() -> None:
    unknown_model = {**PLAN, "model": "no-such-model"}
    assert cost_accounted(run(0.5, unknown_model), run(0.5, unknown_model)).outcome == "pass"
    assert cost_accounted(run(0.7, unknown_model), run(0.5, unknown_model)).outcome == "fail"
    no_cost = cost_accounted(run(None, PLAN), run(None, PLAN))  # model calls made, no cost recorded at all
    assert no_cost.outcome == "n/a" and "records no cost_usd" in no_cost.reason, no_cost  # never a pass
    assert cost_accounted(run(None), run(None)).outcome == "n/a"  # no model calls, no cost
    assert cost_accounted(run(0.5, unknown_model), None).outcome == "unknown"
