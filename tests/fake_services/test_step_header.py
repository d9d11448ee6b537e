"""A request names its step with a `Killpoint-Step` header: the fakes pass it into the hook's info as `step`,
which step attribution takes before the key or the adapter's records."""

from __future__ import annotations

import httpx

from killpoint.fake_services import Services
from killpoint.run.attribution import StepAttribution
from tests.helpers.hooks import recording_hook

EMAIL = {"from": "billing@example.com", "to": ["ada@example.com"], "subject": "Your invoice", "html": "<p>42</p>"}


def test_the_step_header_reaches_the_hook_as_step():
    hook, seen = recording_hook()
    with Services.start(hook=hook) as services, httpx.Client(timeout=10) as client:
        url = services.url("resend", "r-1") + "/emails"
        auth = {"Authorization": "Bearer re_x"}
        assert client.post(url, json=EMAIL, headers={**auth, "Killpoint-Step": "email_step"}).status_code == 200
        assert client.post(url, json=EMAIL, headers={**auth, "Idempotency-Key": "r-1:other"}).status_code == 200
    named = [s for s in seen if s["point"] == "effect.received"]
    assert [s.get("step") for s in named] == ["email_step", None], named


def test_header_then_key_then_the_records_for_a_black_box_run():
    steps = StepAttribution()
    cursor = lambda: "record"  # noqa: E731 - the adapter's step in progress
    assert steps.step_of("r-1", {"step": "email_step", "key": "r-1:charge"}, cursor) == "email_step"
    assert steps.step_of("r-1", {"key": "r-1:email"}, cursor) == "email"  # a re-send is its own step's
    assert steps.step_of("r-1", {"key": None}, cursor) == "record"
