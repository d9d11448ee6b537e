"""`--effect NAME=URL` through the CLI: a service killpoint has no fake for (a sandbox SMS API started by the
test on 127.0.0.1) is covered through the recording proxy. A keyed agent passes a kill after the SMS API
applied the text; a keyless one sends it twice, exactly_once says so, and its replay line, run, fails the
same way. A service that nests its ids and sends no replay header (a Zendesk-like ticket API) leaves a keyed
agent's verdict unknown, naming the declaration that settles it (`,id=ticket.id`); declared, the keyed agent
passes and a keyless one fails. A bad `--effect` is one line and exit 2, with nothing left behind.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.fake_services.sms_upstream import SmsApi
from tests.fake_services.ticket_upstream import TicketApi
from tests.helpers.checks import REPLAY, cli_args, describe, failing_checkers

SCHEDULE = "notify:effect.applied:kill"


@pytest.fixture
def sms():
    with SmsApi() as api:
        yield api


def replay(sandbox, sms: SmsApi, steps: str):
    return sandbox.run("replay", "--scenario", "crash-points", "--schedule", SCHEDULE, "--steps", steps,
                       "--effect", f"sms={sms.url}", "--out", str(sandbox.out))


def test_a_keyed_text_survives_a_kill_after_the_sms_api_applied_it(sandbox, sms):
    done = replay(sandbox, sms, "tests.gallery.variants.sms_agent")
    assert done.returncode == 0, describe(done)
    texts = [m["text"] for m in sms.sent]
    assert texts and len(texts) == len(set(texts)), texts  # one text per run, the faulted one included
    history = [json.loads(line) for run in sandbox.out.iterdir() for line in (run / "history.jsonl").open()]
    kills = [e for e in history if e["type"] == "fault"]
    assert len(kills) == 1 and kills[0]["point"] == "effect.applied", describe(done)
    run = kills[0]["run_id"]
    effects = [e["record"] for e in history if e["type"] == "effect" and e["run_id"] == run]
    attempts = [e["record"]["outcome"] for e in history if e["type"] == "attempt" and e["run_id"] == run]
    assert [e["service"] for e in effects] == ["sms"] and effects[0]["key"] == f"{run}:notify"
    assert attempts == ["applied", "deduplicated"], attempts  # the resumed step's retry, replayed by the API


def test_a_keyless_text_sent_twice_is_found_and_the_replay_line_reproduces_it(sandbox, sms):
    done = replay(sandbox, sms, "tests.gallery.variants.sms_agent_keyless")
    assert done.returncode == 1, describe(done)
    assert "exactly_once" in failing_checkers(done.stdout), describe(done)
    assert re.search(r"extra x1: sms POST /\S* key=None", done.stdout), describe(done)  # its endpoint named
    line = REPLAY.search(done.stdout)
    assert line and f"--effect sms={sms.url}" in line.group(1), describe(done)
    sent = len(sms.sent)
    again = sandbox.run(*cli_args(line.group(1)), "--out", str(sandbox.out))
    assert again.returncode == 1 and "exactly_once" in failing_checkers(again.stdout), describe(again)
    assert len(sms.sent) > sent  # the replay ran against the same SMS API


@pytest.fixture
def tickets():
    with TicketApi() as api:
        yield api


@pytest.mark.parametrize("steps, spec, code, outcome", [
    ("ticket_agent", "", 1, "UNKNOWN"),
    ("ticket_agent", ",id=ticket.id", 0, "PASS"),
    ("ticket_agent_keyless", ",id=ticket.id", 1, "FAIL"),
])
def test_a_nested_id_is_unknown_until_declared_then_keys_decide(sandbox, tickets, steps, spec, code, outcome):
    done = sandbox.run("replay", "--scenario", "crash-points", "--schedule", "open:effect.applied:kill",
                       "--steps", f"tests.gallery.variants.{steps}", "--effect", f"tickets={tickets.url}{spec}",
                       "--out", str(sandbox.out))
    assert done.returncode == code and re.search(rf"^{outcome}\s+crash-points", done.stdout, re.MULTILINE), describe(done)
    # what the service did: one ticket per run (each run texts once), and the keyless agent's one extra
    assert len(tickets.tickets) == len(tickets.texts) + (1 if outcome == "FAIL" else 0), describe(done)
    if outcome == "UNKNOWN":
        assert re.search(r"exactly_once: unknown: .*--effect tickets=\S+,id=PATH \(e\.g\. id=ticket\.id", done.stdout)
        assert "exactly_once" not in failing_checkers(done.stdout), describe(done)
    if outcome == "FAIL":
        assert "exactly_once" in failing_checkers(done.stdout), describe(done)
        assert f"--effect tickets={tickets.url},id=ticket.id" in done.stdout  # the replay line keeps the declaration


@pytest.mark.parametrize("effect, problem", [
    ("sms", "is not NAME=URL"), ("stripe=http://127.0.0.1:1", "a fake's name"), ("sms=ftp://x", "not an http"),
    ("sms=http://127.0.0.1:1,key=x", "only id=PATH"),
])
def test_a_bad_effect_is_one_line_and_exit_2_with_nothing_left(sandbox, effect, problem):
    done = sandbox.run("replay", "--scenario", "crash-points", "--schedule", "email:effect.applied:kill",
                       "--steps", "tests.gallery.variants.tiny_agent", "--effect", effect, "--out", str(sandbox.out))
    assert done.returncode == 2, describe(done)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "error[bad-effect]" in lines[0] and problem in lines[0], describe(done)
    assert not sandbox.out.exists() and sandbox.survivors() == [] and sandbox.leftover_dirs() == []
