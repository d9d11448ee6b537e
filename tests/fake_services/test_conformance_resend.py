"""The real resend SDK through every endpoint the fake Resend serves: Emails send / get / list / cancel /
update, Batch.send (idempotent, each email an effect), Contacts create / get / list / update / remove (with
and without an audience), and Resend's 404 for what is not served."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from killpoint.fake_services import Decision, Services

resend = pytest.importorskip("resend")

SENDER = "billing@acme.dev"


def email(n: int, **more: Any) -> dict[str, Any]:
    return {"from": SENDER, "to": [f"user{n}@example.com"], "subject": f"hello {n}", "html": f"<p>{n}</p>", **more}


@pytest.fixture
def svc(monkeypatch) -> Iterator[Services]:
    with Services.start() as services:
        monkeypatch.setattr(resend, "api_key", "re_test_killpoint")
        monkeypatch.setattr(resend, "api_url", services.url("resend", "r-1"))
        yield services


def outcomes(svc: Services) -> list[str]:
    return [a["outcome"] for a in svc.attempts("r-1")]


def test_send_get_and_list(svc):
    ids = [resend.Emails.send(email(n))["id"] for n in range(3)]
    got = resend.Emails.get(ids[0])
    assert (got["object"], got["to"], got["subject"], got["last_event"]) == ("email", ["user0@example.com"],
                                                                            "hello 0", "delivered")
    page = resend.Emails.list()
    assert page["object"] == "list" and [e["id"] for e in page["data"]] == ids[::-1] and not page["has_more"]
    first = resend.Emails.list({"limit": 2})
    assert [e["id"] for e in first["data"]] == [ids[2], ids[1]] and first["has_more"]
    rest = resend.Emails.list({"limit": 2, "after": ids[1]})
    assert [e["id"] for e in rest["data"]] == [ids[0]]
    assert [a["path"] for a in svc.attempts("r-1")] == ["/emails"] * 3  # reads are not attempts


def test_cancel_and_update_a_scheduled_email(svc):
    later = resend.Emails.send(email(1, scheduled_at="2030-01-01T09:00:00Z"))["id"]
    assert resend.Emails.get(later)["last_event"] == "scheduled"
    moved = resend.Emails.update({"id": later, "scheduled_at": "2030-02-01T09:00:00Z"})
    assert moved["id"] == later and resend.Emails.get(later)["scheduled_at"] == "2030-02-01T09:00:00Z"
    canceled = resend.Emails.cancel(later)
    assert canceled["id"] == later and resend.Emails.get(later)["last_event"] == "canceled"
    now = resend.Emails.send(email(2))["id"]
    with pytest.raises(resend.exceptions.ResendError) as caught:
        resend.Emails.cancel(now)
    assert "only a scheduled email" in caught.value.message
    with pytest.raises(resend.exceptions.ResendError) as caught:
        resend.Emails.cancel("4ef9a417-02e9-4d39-ad75-9611e0fcc33c")
    assert caught.value.code == 404
    assert [a["path"] for a in svc.attempts("r-1") if a["outcome"] == "applied"][1:3] == [
        f"/emails/{later}", f"/emails/{later}/cancel"]


def test_batch_is_idempotent_and_each_email_is_an_effect(svc):
    batch = [email(1), email(2), email(3)]
    sent = resend.Batch.send(batch, {"idempotency_key": "digest-7"})
    ids = [d["id"] for d in sent["data"]]
    assert len(set(ids)) == 3
    again = resend.Batch.send(batch, {"idempotency_key": "digest-7"})
    assert [d["id"] for d in again["data"]] == ids
    with pytest.raises(resend.exceptions.ResendError) as caught:
        resend.Batch.send([email(1), email(9)], {"idempotency_key": "digest-7"})
    assert caught.value.error_type == "invalid_idempotent_request"
    effects = svc.effects("r-1")
    assert [e["id"] for e in effects] == ids and [e["key"] for e in effects] == ["digest-7#0", "digest-7#1",
                                                                               "digest-7#2"]
    assert effects[1]["payload"]["to"] == ["user2@example.com"]
    assert outcomes(svc) == ["applied", "deduplicated", "rejected"]
    assert resend.Emails.get(ids[2])["subject"] == "hello 3"
    with pytest.raises(resend.exceptions.ResendError):
        resend.Batch.send([email(4), {"from": SENDER, "subject": "no recipient"}])
    assert len(svc.effects("r-1")) == 3  # strict: an invalid email refuses the whole batch


def test_batch_faults_land_at_the_kill_points(svc):
    svc.set_hook(lambda point, info: Decision.ERROR if point == "effect.applied" else None)
    with pytest.raises(resend.exceptions.ResendError):
        resend.Batch.send([email(1), email(2)], {"idempotency_key": "b-1"})
    svc.set_hook(None)
    retried = resend.Batch.send([email(1), email(2)], {"idempotency_key": "b-1"})
    assert [d["id"] for d in retried["data"]] == [e["id"] for e in svc.effects("r-1")]
    assert outcomes(svc) == ["injected-error", "deduplicated"]


@pytest.mark.parametrize("audience", [None, "78261eea-8f8b-4381-83c6-79fa7120f1cf"])
def test_contacts(svc, audience):
    where = {"audience_id": audience} if audience else {}
    made = resend.Contacts.create({"email": "ada@example.com", "first_name": "Ada", **where})
    assert made["object"] == "contact"
    other = resend.Contacts.create({"email": "bob@example.com", **where})
    got = resend.Contacts.get(id=made["id"], **where)
    assert (got["email"], got["first_name"], got["unsubscribed"]) == ("ada@example.com", "Ada", False)
    assert resend.Contacts.get(email="bob@example.com", **where)["id"] == other["id"]
    resend.Contacts.update({"id": made["id"], "unsubscribed": True, "last_name": "L", **where})
    assert resend.Contacts.get(id=made["id"], **where)["unsubscribed"] is True
    listed = resend.Contacts.list(**({"audience_id": audience} if audience else {}))
    assert [c["id"] for c in listed["data"]] == [other["id"], made["id"]]
    removed = resend.Contacts.remove(id=other["id"], **where)
    assert removed["deleted"] is True and removed["contact"] == other["id"]
    with pytest.raises(resend.exceptions.ResendError) as caught:
        resend.Contacts.get(email="bob@example.com", **where)
    assert caught.value.code == 404
    with pytest.raises(resend.exceptions.ResendError):
        resend.Contacts.create({"first_name": "no email", **where})
    assert [e["response"]["object"] for e in svc.effects("r-1")] == ["contact"] * 4


def test_what_is_not_served_is_resends_404_naming_the_endpoint(svc):
    with pytest.raises(resend.exceptions.ResendError) as caught:
        resend.Domains.list()
    assert caught.value.code == 404 and caught.value.error_type == "not_found"
    assert "GET /domains" in caught.value.message
