"""decisions_hold, invariants_hold and same_as_serial on hand-made evidence (harness/checkers/decisions.py,
invariants.py): each fails on the bug it names, passes the correct shape next to it, and is n/a when its
evidence is absent."""

from __future__ import annotations

import pytest

from killpoint.checkers import resolve
from killpoint.checkers.decisions import decisions_hold
from killpoint.checkers.evidence import Evidence
from killpoint.checkers.invariants import (
    Invariant,
    declared,
    facts,
    invariants_hold,
    same_as_serial,
    witnessed,
)

APPROVE, REVIEW = "answer aaa verdict=approve", "answer bbb verdict=review"


def asked(order: int, text: str, digest: str = "d1") -> dict:
    return {"order": order, "request_digest": digest, "response_text": text, "outcome": "applied"}


def charge(order: int, amount: int = 12_500) -> dict:
    return {"order": order, "service": "ledger", "key": "r:charge", "payload": {"amount_cents": amount}}


def test_decisions_hold_fails_an_effect_made_on_a_replaced_answer() -> None:
    ev = Evidence("r", model_requests=[asked(1, APPROVE), asked(3, REVIEW)], effects=[charge(2)],
                  final={"verdict": "review"})
    v = decisions_hold(ev)
    assert v.outcome == "fail" and "final state records the later answer" in v.evidence[0]
    assert resolve("decisions_hold") is decisions_hold


def test_decisions_hold_passes_when_the_effect_follows_the_kept_answer() -> None:
    ev = Evidence("r", model_requests=[asked(1, APPROVE), asked(2, REVIEW)], effects=[charge(3)],
                  final={"verdict": "review"})
    assert decisions_hold(ev).outcome == "pass"
    same = Evidence("r", model_requests=[asked(1, APPROVE), asked(3, APPROVE)], effects=[charge(2)])
    assert decisions_hold(same).outcome == "n/a"


INV = {"balances": {"sql": "SELECT SUM(balance_cents) FROM balances", "equals": "ledger.amount_cents"},
       "numbers": {"sql": "SELECT COUNT(DISTINCT n) FROM numbers", "equals": "ledger"}}


def test_invariants_are_declared_and_measured_against_the_witnesses() -> None:
    balances, numbers = declared(INV, "m")
    assert balances == Invariant("balances", INV["balances"]["sql"], "ledger.amount_cents")
    effects = [charge(1), charge(2, 9_900), {"service": "mailer", "payload": {}}]
    assert witnessed(balances, effects) == 22_400 and witnessed(numbers, effects) == 2
    held = facts([balances], {"balances": 100}, {"balances": 22_500}, effects, ["a", "b"])
    assert invariants_hold(Evidence("a", extra={"invariants": held})).outcome == "pass"
    lost = facts([balances], {"balances": 100}, {"balances": 12_600}, effects, ["a", "b"])
    v = invariants_hold(Evidence("a", extra={"invariants": lost}))
    assert v.outcome == "fail" and "moved by 12500" in v.evidence[0]
    assert invariants_hold(Evidence("a")).outcome == "n/a"


@pytest.mark.parametrize("raw", [[1], {"x": {"sql": 1, "equals": "ledger"}}, {"x": {"sql": "SELECT 1", "equals": ""}}])
def test_a_malformed_declaration_names_the_module_and_the_shape(raw: object) -> None:
    with pytest.raises(ValueError, match="mod.INVARIANTS"):
        declared(raw, "mod")


def test_same_as_serial_fails_a_difference_only() -> None:
    alike = {"balances": {"concurrent": 37_500, "serial": 37_500}}
    assert same_as_serial(Evidence("a", extra={"serial": alike})).outcome == "pass"
    lost = {"balances": {"concurrent": 25_000, "serial": 37_500}}
    v = same_as_serial(Evidence("a", extra={"serial": lost}))
    assert v.outcome == "fail" and v.evidence == ("balances: concurrent 25000, serial 37500",)
    assert same_as_serial(Evidence("a")).outcome == "n/a"
