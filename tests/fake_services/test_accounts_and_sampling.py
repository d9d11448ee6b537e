"""Provider-wide key spaces and the sampling model (fake_services/journal.py, sampling.py): a key one run of a
shared account used is replayed to another run of it, or refused with other parameters, while each run's
records stay its own; a sampling model answers a repeated request anew, the other verdict, the same way
for the same seed; pinned answers are answered as pinned."""

from __future__ import annotations

import httpx2
import pytest

from killpoint.fake_services import AdminClient, Services

CHARGE = {"account": "acct-42", "amount_cents": 12_500, "currency": "usd"}
ASK = {"model": "claude-test", "max_tokens": 64, "messages": [{"role": "user", "content": "approve INV-1?"}]}


def charge(c: httpx2.Client, svc: Services, run: str, body: dict, key: str) -> httpx2.Response:
    return c.post(svc.url("ledger", run) + "/v1/charges", json=body, headers={"Idempotency-Key": key})


def ask(c: httpx2.Client, svc: Services, run: str) -> str:
    r = c.post(svc.url("model", run) + "/v1/messages", json=ASK, headers={"x-api-key": "k"})
    assert r.status_code == 200, r.text
    return r.json()["content"][0]["text"]


def test_runs_are_their_own_accounts_unless_shared(svc: Services, client: httpx2.Client) -> None:
    assert charge(client, svc, "a", CHARGE, "acct-42:charge").status_code == 200
    assert charge(client, svc, "b", CHARGE, "acct-42:charge").status_code == 200  # another account: applied
    assert len(svc.effects("b")) == 1
    svc.share_account("merchant", ["c", "d", "e"])
    first = charge(client, svc, "c", CHARGE, "acct-42:charge")
    again = charge(client, svc, "d", CHARGE, "acct-42:charge")
    other = charge(client, svc, "e", {**CHARGE, "amount_cents": 9_900}, "acct-42:charge")
    assert again.status_code == 200 and again.headers.get("Idempotent-Replayed") == "true"
    assert again.json()["id"] == first.json()["id"]
    assert other.status_code == 422 and other.json()["error"]["type"] == "idempotency_error"
    assert svc.effects("d") == [] and [a["outcome"] for a in svc.attempts("d")] == ["deduplicated"]
    assert [a["outcome"] for a in svc.attempts("e")] == ["rejected"]
    svc.reset("c")  # the run that applied the key is forgotten, and its key with it
    assert charge(client, svc, "d", CHARGE, "acct-42:charge").headers.get("Idempotent-Replayed") is None


def test_accounts_over_http_admin(svc: Services, client: httpx2.Client) -> None:
    admin = AdminClient(svc.base_url("ledger"))
    admin.share_account("m", ["x", "y"])
    charge(client, svc, "x", CHARGE, "k")
    assert charge(client, svc, "y", CHARGE, "k").headers.get("Idempotent-Replayed") == "true"
    with pytest.raises(RuntimeError, match="invalid_accounts"):
        admin._call("POST", "accounts", body={"account": "m", "runs": "x"})


def test_a_sampling_model_answers_a_repeat_anew_and_reproducibly(svc: Services, client: httpx2.Client) -> None:
    pure = [ask(client, svc, "plain") for _ in range(3)]
    assert len(set(pure)) == 1  # the default model is a pure function of the request
    answers = {}
    for run in ("s1", "s2"):
        svc.sample(run, 7)
        answers[run] = [ask(client, svc, run) for _ in range(3)]
    assert answers["s1"] == answers["s2"]  # the same seed and repeats: the same answers
    first, second, third = answers["s1"]
    assert first == pure[0]  # the first answer is the crash-free run's
    verdict = [a.rsplit("verdict=", 1)[1] for a in answers["s1"]]
    assert verdict[0] != verdict[1] != verdict[2]  # each repeat contradicts the answer before it
    assert [r.get("sampled") for r in svc.model_requests("s1")] == [None, 1, 2]
    svc.sample("s3", 8)
    assert [ask(client, svc, "s3") for _ in range(2)][1] != second  # another seed, another draw


def test_pinned_answers_are_answered_from_the_first_request(svc: Services, client: httpx2.Client) -> None:
    svc.sample("s", 1)
    ask(client, svc, "s")
    later = ask(client, svc, "s")
    digest = svc.model_requests("s")[0]["request_digest"]
    svc.pin_answers("p", {digest: later})
    assert ask(client, svc, "p") == later
    svc.reset()
    assert ask(client, svc, "p") != later  # reset forgets pins and samplers
