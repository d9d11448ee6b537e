"""The real stripe SDK through every endpoint the fake Stripe serves: PaymentIntents (create, confirm, capture,
cancel, retrieve, list, search), Charges, Refunds (with Stripe's refusal rules), Customers, Events, the seed,
signed webhooks the SDK verifies, and Stripe's 404 for what is not served.

Shapes are checked against the installed SDK's typed resources (``stripe.PaymentIntent`` ... are generated
from Stripe's OpenAPI description): every field the fake returns is one the SDK declares, every field the
SDK declares non-optional is there with its type, and each ``Literal`` field (``object``, ``status``) holds
one of its values. Stripe's OpenAPI file itself ships in no package here (PyPI, npm).
"""

from __future__ import annotations

import json
import queue
import threading
import typing
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from killpoint.fake_services import Services
from killpoint.fake_services.stripe_events import DEFAULT_SECRET, SECRET_VAR, URL_VAR
from killpoint.fake_services.stripe_store import SEED_VAR

stripe = pytest.importorskip("stripe")

CARD = {"payment_method": "pm_card_visa"}


def client(svc: Services, run: str = "r-1") -> Any:
    return stripe.StripeClient("sk_test_killpoint", base_addresses={"api": svc.url("stripe", run)},
                               max_network_retries=0)


def intent(c: Any, key: str, **params: Any) -> Any:
    return c.v1.payment_intents.create(params={"amount": 2000, "currency": "usd", **params},
                                       options={"idempotency_key": key})


def refusal(call: Any) -> Any:
    with pytest.raises(stripe.InvalidRequestError) as caught:
        call()
    return caught.value


# shapes ------------------------------------------------------------------------------------------


def declared(cls: type) -> dict[str, Any]:
    """The public fields of an SDK resource class and their (evaluated) annotations."""
    out: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        for name, hint in vars(klass).get("__annotations__", {}).items():
            if not name.startswith("_") and name.isidentifier() and name != "OBJECT_NAME":
                out[name] = hint
    return out


def literal_values(hint: Any) -> tuple[Any, ...] | None:
    """The values of a ``Literal`` (alone, or inside a Union with ``str``), else None."""
    if typing.get_origin(hint) is typing.Literal:
        return typing.get_args(hint)
    if typing.get_origin(hint) is typing.Union:
        arms = [literal_values(a) for a in typing.get_args(hint)]
        return next((a for a in arms if a is not None), None)
    return None


def assert_shape(obj: Any, cls: type) -> None:
    """``obj`` (an SDK object or its dict) has the shape ``cls`` declares."""
    data = obj.to_dict() if hasattr(obj, "to_dict") else obj
    fields = declared(cls)
    assert set(data) <= set(fields), f"{cls.__name__}: undeclared fields {set(data) - set(fields)}"
    for name, hint in fields.items():
        optional = typing.get_origin(hint) is typing.Union and type(None) in typing.get_args(hint)
        if not optional:
            assert name in data and data[name] is not None, f"{cls.__name__}.{name} is required"
            if hint in (int, str, bool):
                assert type(data[name]) is hint, f"{cls.__name__}.{name}: {data[name]!r} is no {hint.__name__}"
        values = literal_values(hint)
        if values is not None and data.get(name) is not None and typing.get_origin(hint) is typing.Literal:
            assert data[name] in values, f"{cls.__name__}.{name}: {data[name]!r} not in {values}"
        elif values is not None and name == "status" and data.get(name) is not None:
            assert data[name] in values, f"{cls.__name__}.status: {data[name]!r} not in {values}"


def test_every_object_has_the_shape_the_sdk_declares(svc):
    c = client(svc)
    customer = c.v1.customers.create(params={"email": "ada@example.com", "name": "Ada"})
    pi = intent(c, "k1", customer=customer.id, confirm=True, **CARD)
    charge = c.v1.charges.retrieve(pi.latest_charge)
    made = c.v1.charges.create(params={"amount": 500, "currency": "eur", "source": "tok_visa"})
    refund = c.v1.refunds.create(params={"charge": charge.id, "amount": 500})
    events = c.v1.events.list()
    for obj, cls in [(customer, stripe.Customer), (pi, stripe.PaymentIntent), (charge, stripe.Charge),
                     (made, stripe.Charge), (refund, stripe.Refund), *[(e, stripe.Event) for e in events.data]]:
        assert_shape(obj, cls)
    assert_shape(intent(c, "k2"), stripe.PaymentIntent)


# payment intents ---------------------------------------------------------------------------------


def test_a_confirmed_intent_has_a_real_charge(svc):
    c = client(svc)
    pi = intent(c, "pay-1", confirm=True, **CARD)
    assert pi.status == "succeeded" and pi.latest_charge.startswith("ch_")
    charge = c.v1.charges.retrieve(pi.latest_charge)
    assert (charge.amount, charge.amount_captured, charge.captured, charge.payment_intent) == (2000, 2000, True, pi.id)
    expanded = c.v1.payment_intents.retrieve(pi.id, params={"expand": ["latest_charge"]})
    assert expanded.latest_charge.id == charge.id and expanded.latest_charge.object == "charge"
    assert [e["response"]["object"] for e in svc.effects("r-1")] == ["payment_intent"]  # the charge is no effect


def test_confirm_then_capture_then_refusals(svc):
    c = client(svc)
    pi = intent(c, "pay-1")
    assert pi.status == "requires_payment_method"
    err = refusal(lambda: c.v1.payment_intents.confirm(pi.id))
    assert err.code == "payment_intent_unexpected_state" and "missing a payment method" in err.user_message
    held = c.v1.payment_intents.confirm(pi.id, params={"payment_method": "pm_card_visa"},
                                        options={"idempotency_key": "confirm-1"})
    assert held.status == "succeeded" and held.latest_charge
    again = c.v1.payment_intents.confirm(pi.id, params={"payment_method": "pm_card_visa"},
                                         options={"idempotency_key": "confirm-1"})
    assert again.to_dict() == held.to_dict() and again.last_response.headers["Idempotent-Replayed"] == "true"
    err = refusal(lambda: c.v1.payment_intents.confirm(pi.id, params={"payment_method": "pm_card_visa"}))
    assert err.code == "payment_intent_unexpected_state" and "status of succeeded" in err.user_message

    manual = intent(c, "pay-2", capture_method="manual", confirm=True, **CARD)
    assert (manual.status, manual.amount_capturable, manual.amount_received) == ("requires_capture", 2000, 0)
    assert c.v1.charges.retrieve(manual.latest_charge).captured is False
    err = refusal(lambda: c.v1.payment_intents.capture(manual.id, params={"amount_to_capture": 5000}))
    assert err.code == "amount_too_large"
    done = c.v1.payment_intents.capture(manual.id, params={"amount_to_capture": 1500})
    assert (done.status, done.amount_received, done.amount_capturable) == ("succeeded", 1500, 0)
    charge = c.v1.charges.retrieve(done.latest_charge)
    assert (charge.captured, charge.amount_captured, charge.amount_refunded) == (True, 1500, 500)
    err = refusal(lambda: c.v1.payment_intents.capture(manual.id))
    assert err.code == "payment_intent_unexpected_state"

    dropped = intent(c, "pay-3")
    assert c.v1.payment_intents.cancel(dropped.id).status == "canceled"
    assert refusal(lambda: c.v1.payment_intents.cancel(done.id)).code == "payment_intent_unexpected_state"
    with pytest.raises(stripe.InvalidRequestError) as caught:
        c.v1.payment_intents.confirm("pi_missing", params=CARD)
    assert caught.value.http_status == 404 and caught.value.code == "resource_missing"
    paths = [a["path"] for a in svc.attempts("r-1") if a["outcome"] == "applied"]
    assert f"/v1/payment_intents/{pi.id}/confirm" in paths and f"/v1/payment_intents/{manual.id}/capture" in paths


def test_list_paginates_and_filters(svc):
    c = client(svc)
    cus = c.v1.customers.create(params={"email": "b@example.com"})
    made = [intent(c, f"k{i}", customer=cus.id if i % 2 else None) for i in range(5)]
    page = c.v1.payment_intents.list(params={"limit": 2})
    assert [p.id for p in page.data] == [made[4].id, made[3].id] and page.has_more
    assert [p.id for p in page.auto_paging_iter()] == [m.id for m in reversed(made)]
    mine = c.v1.payment_intents.list(params={"customer": cus.id})
    assert [p.id for p in mine.data] == [made[3].id, made[1].id] and not mine.has_more
    before = c.v1.payment_intents.list(params={"ending_before": made[2].id})
    assert [p.id for p in before.data] == [made[4].id, made[3].id]


def test_search_speaks_stripes_query_language(svc):
    c = client(svc)
    intent(c, "a", metadata={"order": "o-1"}, confirm=True, **CARD)
    b = intent(c, "b", amount=9000, metadata={"order": "o-2"})
    found = c.v1.payment_intents.search(params={"query": "metadata['order']:'o-2'"})
    assert [p.id for p in found.data] == [b.id] and found.object == "search_result"
    assert len(c.v1.payment_intents.search(params={"query": "status:'succeeded' OR amount>5000"}).data) == 2
    assert len(c.v1.payment_intents.search(params={"query": "status:'succeeded' AND amount>5000"}).data) == 0
    assert len(c.v1.payment_intents.search(params={"query": "-status:'succeeded'"}).data) == 1
    err = refusal(lambda: c.v1.payment_intents.search(params={"query": "colour:'red'"}))
    assert "unsupported search field" in err.user_message


# refunds -----------------------------------------------------------------------------------------


def test_refund_rules_as_stripe_refuses(svc):
    c = client(svc)
    pi = intent(c, "pay-1", confirm=True, **CARD)
    whole = c.v1.refunds.create(params={"charge": pi.latest_charge}, options={"idempotency_key": "refund-1"})
    assert (whole.amount, whole.charge, whole.payment_intent, whole.status) == (2000, pi.latest_charge, pi.id,
                                                                               "succeeded")
    replay = c.v1.refunds.create(params={"charge": pi.latest_charge}, options={"idempotency_key": "refund-1"})
    assert replay.id == whole.id  # a retry with the key is the first answer, not a refusal
    err = refusal(lambda: c.v1.refunds.create(params={"payment_intent": pi.id}))
    assert (err.code, err.http_status) == ("charge_already_refunded", 400)
    assert err.user_message == f"Charge {pi.latest_charge} has already been refunded."
    charge = c.v1.charges.retrieve(pi.latest_charge)
    assert (charge.amount_refunded, charge.refunded) == (2000, True)

    other = intent(c, "pay-2", confirm=True, **CARD)
    c.v1.refunds.create(params={"payment_intent": other.id, "amount": 1500})
    err = refusal(lambda: c.v1.refunds.create(params={"payment_intent": other.id, "amount": 600}))
    assert (err.code, err.param) == ("amount_too_large", "amount")
    assert err.user_message == "Refund amount ($6.00) is greater than unrefunded amount on charge ($5.00)"
    assert err.json_body["error"]["type"] == "invalid_request_error"
    pending = intent(c, "pay-3")
    assert refusal(lambda: c.v1.refunds.create(params={"payment_intent": pending.id})).code == "charge_not_refundable"
    assert [e["response"]["object"] for e in svc.effects("r-1")].count("refund") == 2


def test_refunds_list_retrieve_and_cancel(svc):
    c = client(svc)
    card = intent(c, "pay-1", confirm=True, **CARD)
    bank = intent(c, "pay-2", confirm=True, payment_method="pm_bank", payment_method_types=["customer_balance"])
    r1 = c.v1.refunds.create(params={"payment_intent": card.id, "amount": 100})
    r2 = c.v1.refunds.create(params={"payment_intent": bank.id})
    assert r2.status == "requires_action"
    assert [r.id for r in c.v1.refunds.list().data] == [r2.id, r1.id]
    assert [r.id for r in c.v1.refunds.list(params={"payment_intent": card.id}).data] == [r1.id]
    assert c.v1.refunds.retrieve(r1.id).amount == 100
    err = refusal(lambda: c.v1.refunds.cancel(r1.id))
    assert "requires_action" in err.user_message
    assert c.v1.refunds.cancel(r2.id).status == "canceled"
    assert c.v1.charges.retrieve(bank.latest_charge).amount_refunded == 0  # a canceled refund gives back nothing
    assert c.v1.refunds.create(params={"payment_intent": bank.id}).amount == 2000


def test_concurrent_full_refunds_only_one_applies(svc):
    c = client(svc)
    pi = intent(c, "pay-1", confirm=True, **CARD)
    results: list[str] = []
    start = threading.Barrier(4)

    def refund() -> None:
        start.wait()
        try:
            client(svc).v1.refunds.create(params={"payment_intent": pi.id})
            results.append("ok")
        except stripe.InvalidRequestError as exc:
            results.append(exc.code)

    threads = [threading.Thread(target=refund) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["charge_already_refunded"] * 3 + ["ok"]


# charges and customers ---------------------------------------------------------------------------


def test_charges_list_and_search(svc):
    c = client(svc)
    cus = c.v1.customers.create(params={"email": "c@example.com"})
    made = c.v1.charges.create(params={"amount": 700, "currency": "usd", "customer": cus.id})
    pi = intent(c, "pay-1", confirm=True, **CARD)
    assert [ch.id for ch in c.v1.charges.list().data] == [pi.latest_charge, made.id]
    assert [ch.id for ch in c.v1.charges.list(params={"customer": cus.id}).data] == [made.id]
    assert [ch.id for ch in c.v1.charges.search(params={"query": "amount:700"}).data] == [made.id]
    err = refusal(lambda: c.v1.charges.create(params={"amount": 1, "currency": "usd", "customer": "cus_nobody"}))
    assert (err.code, err.param) == ("resource_missing", "customer")


def test_customers_create_retrieve_update_list(svc):
    c = client(svc)
    ada = c.v1.customers.create(params={"email": "ada@example.com", "name": "Ada", "metadata": {"tier": "gold"}},
                                options={"idempotency_key": "cus-ada"})
    assert (ada.object, ada.email, ada.name, ada.metadata["tier"]) == ("customer", "ada@example.com", "Ada", "gold")
    bob = c.v1.customers.create(params={"email": "bob@example.com"})
    changed = c.v1.customers.update(ada.id, params={"name": "Ada L.", "metadata": {"since": "2020", "tier": ""}})
    assert changed.name == "Ada L." and changed.metadata.to_dict() == {"since": "2020"}
    assert c.v1.customers.retrieve(ada.id).name == "Ada L."
    assert [x.id for x in c.v1.customers.list().data] == [bob.id, ada.id]
    assert [x.id for x in c.v1.customers.list(params={"email": "bob@example.com"}).data] == [bob.id]
    assert [x.id for x in c.v1.customers.search(params={"query": "email~'ada'"}).data] == [ada.id]
    with pytest.raises(stripe.InvalidRequestError) as caught:
        c.v1.customers.retrieve("cus_nobody")
    assert (caught.value.http_status, caught.value.code) == (404, "resource_missing")
    paths = [a["path"] for a in svc.attempts("r-1")]
    assert paths == ["/v1/customers", "/v1/customers", f"/v1/customers/{ada.id}"]


def test_a_seed_is_there_in_every_run_and_is_no_effect(svc, monkeypatch):
    seed = {"customers": [{"id": "cus_alice", "email": "alice@example.com", "name": "Alice"}],
            "charges": [{"id": "ch_old", "amount": 5000, "currency": "usd", "customer": "cus_alice"}]}
    monkeypatch.setenv(SEED_VAR, json.dumps(seed))
    for run in ("r-1", "r-2"):
        c = client(svc, run)
        assert c.v1.customers.retrieve("cus_alice").email == "alice@example.com"
        assert c.v1.charges.retrieve("ch_old").amount == 5000
        c.v1.refunds.create(params={"charge": "ch_old", "amount": 1000})
        assert c.v1.charges.retrieve("ch_old").amount_refunded == 1000
        assert [e["response"]["object"] for e in svc.effects(run)] == ["refund"]
    monkeypatch.setenv(SEED_VAR, "{not json")
    with pytest.raises(stripe.APIError):
        client(svc).v1.customers.retrieve("cus_alice")


# events and webhooks -----------------------------------------------------------------------------


class Receiver(ThreadingHTTPServer):
    """An endpoint that keeps what is POSTed to it: (path, Stripe-Signature, body)."""

    def __init__(self) -> None:
        self.got: queue.Queue[tuple[str, str, bytes]] = queue.Queue()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.got.put((self.path, self.headers.get("Stripe-Signature", ""), body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


@pytest.fixture
def receiver(monkeypatch) -> Iterator[Receiver]:
    r = Receiver()
    monkeypatch.setenv(URL_VAR, f"http://127.0.0.1:{r.server_address[1]}/hooks/{{run_id}}")
    yield r
    r.shutdown()
    r.server_close()


def test_signed_webhooks_the_sdk_verifies(svc, receiver):
    c = client(svc)
    pi = intent(c, "pay-1", confirm=True, **CARD)
    types = []
    for _ in range(3):
        path, signature, body = receiver.got.get(timeout=10)
        event = stripe.Webhook.construct_event(body, signature, DEFAULT_SECRET)
        types.append(event.type)
        assert path == "/hooks/r-1" and event.request.idempotency_key == "pay-1"
        if event.type == "payment_intent.succeeded":
            assert event.data.object.id == pi.id and event.data.object.latest_charge == pi.latest_charge
        if event.type == "charge.succeeded":
            assert event.data.object.id == pi.latest_charge
    assert types == ["payment_intent.created", "charge.succeeded", "payment_intent.succeeded"]
    c.v1.refunds.create(params={"payment_intent": pi.id})
    got = [receiver.got.get(timeout=10) for _ in range(2)]
    events = [stripe.Webhook.construct_event(body, sig, DEFAULT_SECRET) for _, sig, body in got]
    assert [e.type for e in events] == ["refund.created", "charge.refunded"]
    assert events[1].data.object.refunded is True
    with pytest.raises(stripe.SignatureVerificationError):
        stripe.Webhook.construct_event(got[0][2], got[0][1], "whsec_wrong")
    listed = c.v1.events.list()
    assert [e.type for e in listed.data][:2] == ["charge.refunded", "refund.created"]
    assert c.v1.events.retrieve(listed.data[0].id).type == "charge.refunded"


def test_webhook_secret_is_configurable_and_replays_announce_nothing(svc, receiver, monkeypatch):
    monkeypatch.setenv(SECRET_VAR, "whsec_mine")
    c = client(svc)
    cus = c.v1.customers.create(params={"email": "a@example.com"}, options={"idempotency_key": "cus-1"})
    path, signature, body = receiver.got.get(timeout=10)
    assert stripe.Webhook.construct_event(body, signature, "whsec_mine").type == "customer.created"
    c.v1.customers.create(params={"email": "a@example.com"}, options={"idempotency_key": "cus-1"})  # replayed
    c.v1.customers.update(cus.id, params={"name": "A"})
    path, signature, body = receiver.got.get(timeout=10)
    assert stripe.Webhook.construct_event(body, signature, "whsec_mine").type == "customer.updated"
    assert receiver.got.empty()


# what is not served ------------------------------------------------------------------------------


def test_what_is_not_served_is_stripes_404_naming_the_endpoint(svc):
    c = client(svc)
    with pytest.raises(stripe.InvalidRequestError) as caught:
        c.v1.subscriptions.list()
    assert caught.value.http_status == 404
    assert caught.value.user_message.startswith("Unrecognized request URL (GET: /v1/subscriptions)")
    assert caught.value.json_body["error"]["type"] == "invalid_request_error"
    with pytest.raises(stripe.InvalidRequestError) as caught:
        c.v1.customers.delete("cus_x")
    assert "(DELETE: /v1/customers/cus_x)" in caught.value.user_message
