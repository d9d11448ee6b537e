"""exactly_once's evidence a person can act on: whole keys and payloads, duplicates grouped by effect, the
payload fields that differ as a diff, and knock-on differences folded under their first cause."""

from __future__ import annotations

from killpoint.checkers.effects import exactly_once
from killpoint.checkers.evidence import Evidence

LONG = "x" * 40  # a payload longer than the old 60-character cut


def effect(service: str, id_: str, key: str | None, **payload: object) -> dict:
    return {"service": service, "id": id_, "key": key, "payload": payload}


def test_a_double_charge_is_one_duplicate_and_the_email_naming_it_is_a_knock_on() -> None:
    base = Evidence("run-1", effects=[effect("ledger", "ch_base_00000001", None, amount=100, memo=LONG),
                                      effect("mailer", "em_base_00000001", "run-1:email", charge_id="ch_base_00000001",
                                             to="ada@example.com")])
    run = Evidence("run-2", effects=[effect("ledger", "ch_runx_00000001", None, amount=100, memo=LONG),
                                     effect("ledger", "ch_runx_00000002", None, amount=100, memo=LONG),
                                     effect("mailer", "em_runx_00000001", "run-2:email", charge_id="ch_runx_00000002",
                                            to="ada@example.com")])
    v = exactly_once(run, base)
    assert v.outcome == "fail" and v.reason == "effects done twice"
    assert v.evidence == (
        f'extra x1: ledger key=None {{"amount": 100, "memo": "{LONG}"}} -- a duplicate: applied x2, crash-free x1',
        "  knock-on: payload differs: mailer key=run-2:email (1 field(s)):",
        '      - charge_id: "ch_base_00000001" (<ledger-effect1>)',
        '      + charge_id: "ch_runx_00000002" (<ledger-effect2>)',
    ), "\n".join(v.evidence)


def test_different_keys_are_shown_whole_not_as_placeholders_that_look_alike() -> None:
    base = Evidence("run-1", effects=[effect("mailer", "em_base_00000001", "run-1:invoice-email", to="a")])
    run = Evidence("run-2", effects=[effect("mailer", "em_runx_00000001", "run-2:invoice-email", to="a"),
                                     effect("mailer", "em_runx_00000002", "retry-7f3a9c2e1b", to="a")])
    v = exactly_once(run, base)
    assert v.outcome == "fail"
    assert v.evidence == ('extra x1: mailer key=retry-7f3a9c2e1b {"to": "a"} -- a duplicate: the same payload as '
                          'key=run-2:invoice-email, sent again under another key',), v.evidence


def test_a_changed_payload_without_a_cause_is_its_own_finding_and_a_missing_effect_is_listed() -> None:
    base = Evidence("run-1", effects=[effect("mailer", "em_base_00000001", "run-1:email", amount=100, to="a"),
                                      effect("webhook", "wh_base_00000001", None, event="paid")])
    run = Evidence("run-2", effects=[effect("mailer", "em_runx_00000001", "run-2:email", amount=120, to="a")])
    v = exactly_once(run, base)
    assert v.reason == "effects done with a different payload; effects of the crash-free run never done"
    assert v.evidence == ("payload differs: mailer key=run-2:email (1 field(s)):", "    - amount: 100", "    + amount: 120",
                          'missing x1: webhook key=None {"event": "paid"}'), v.evidence


def test_the_same_payload_sent_again_without_its_key_is_a_duplicate() -> None:
    base = Evidence("run-1", effects=[effect("mailer", "em_base_00000001", "run-1:email", to="a")])
    run = Evidence("run-2", effects=[effect("mailer", "em_runx_00000001", "run-2:email", to="a"),
                                     effect("mailer", "em_runx_00000002", None, to="a")])
    v = exactly_once(run, base)
    assert v.reason == "effects done twice"
    assert v.evidence == ('extra x1: mailer key=None {"to": "a"} -- a duplicate: the same payload as '
                          'key=run-2:email, sent again under no key',), v.evidence
