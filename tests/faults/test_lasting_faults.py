"""Faults that last (issue 23): clock jumps (`clock±N<unit>`: a kill whose resume is that far away in the
worker's time) and outages (`outage`, `outage=N`: every request of a service fails until the resume, or N in
a row). Their grammar, the outage bookkeeping, the mixed and flaky plans that draw them, shrinking and
sharding. Pure: no Postgres, no process."""

from __future__ import annotations

import pytest

from killpoint.faults.mixed import CLOCK_JUMPS, lasting, mixed_schedules
from killpoint.faults.outage import LENGTHS, SDK_ATTEMPTS, Outages
from killpoint.faults.points import base, clock_shift, fits, is_process, outage_length
from killpoint.faults.schedule import Fault, Schedule, ScheduleError
from killpoint.faults.shard import Shard
from killpoint.faults.shrink import shrink
from tests.faults.test_schedule import REFERENCE_POINTS


@pytest.mark.parametrize("text", ["charge:checkpoint.writing:clock+366d", "email:effect.responded:clock-1h",
                                  "plan:step.start:clock+90s@2", "charge:effect.received:outage",
                                  "validate:model.request:outage=5@3",
                                  "charge:effect.received:outage=5,charge:checkpoint.writing:clock-30m"])
def test_lasting_faults_print_back_to_their_text(text: str) -> None:
    schedule = Schedule.parse(text, REFERENCE_POINTS)
    assert str(schedule) == text
    assert Schedule.parse(str(schedule)) == schedule


@pytest.mark.parametrize(("token", "says"), [
    ("charge:step.start:clock", "bad clock action"), ("charge:step.start:clock+1y", "bad clock action"),
    ("charge:step.start:clock+1.5h", "bad clock action"), ("charge:effect.received:outage=0", "bad outage"),
    ("charge:effect.received:outage=x", "bad outage"), ("charge:effect.applied:outage", "cannot happen at"),
    ("charge:effect.received:outages", "bad outage")])
def test_a_bad_lasting_fault_names_the_form_to_write(token: str, says: str) -> None:
    with pytest.raises(ScheduleError) as err:
        Schedule.parse(token, REFERENCE_POINTS)
    assert says in str(err.value) and token in str(err.value)


def test_the_arguments_mean_what_they_say() -> None:
    assert clock_shift("clock+366d") == 366 * 86400 and clock_shift("clock-1h") == -3600
    assert clock_shift("kill") == 0.0
    assert outage_length("outage=5") == 5 and outage_length("outage") is None
    assert base("clock-1h") == "clock" and base("outage=5") == "outage" and base("kill") == "kill"
    assert is_process("clock+1d") and not is_process("outage") and fits("clock+1d", "checkpoint.writing")
    assert fits("outage=5", "model.request") and not fits("outage", "effect.responded")


def test_generated_outages_outlast_every_known_client() -> None:
    lengths = [outage_length(a) for a in LENGTHS]
    assert None in lengths  # until the resume
    assert all(n > max(SDK_ATTEMPTS.values()) for n in lengths if n is not None)


def test_an_outage_until_the_resume_fails_every_request_of_its_service_until_the_next_incarnation() -> None:
    outages = Outages()
    outages.start("r", "ledger", "outage")
    assert [outages.take("r", "ledger") for _ in range(6)] == [True] * 6
    assert not outages.take("r", "mailer") and not outages.take("other", "ledger")
    outages.resumed("r")
    assert not outages.take("r", "ledger")
    assert outages.failed("r") == {"ledger": 7}


def test_an_outage_of_n_requests_fails_n_in_a_row_across_incarnations() -> None:
    outages = Outages()
    outages.start("r", "ledger", "outage=5")  # the request that met the fault is the first of the five
    assert [outages.take("r", "ledger") for _ in range(3)] == [True] * 3
    outages.resumed("r")  # a new incarnation does not end a counted outage
    assert [outages.take("r", "ledger") for _ in range(3)] == [True, False, False]
    assert outages.failed("r") == {"ledger": 5}


def test_mixed_faults_plans_an_outage_at_each_request_point_and_clock_jumps_at_each_checkpoint() -> None:
    plan = [str(s) for s in lasting(REFERENCE_POINTS)]
    assert {"plan:model.request:outage", "validate:model.request:outage", "charge:effect.received:outage",
            "email:effect.received:outage"} <= set(plan)
    assert {f"{step}:checkpoint.writing:{jump}" for step in REFERENCE_POINTS for jump in CLOCK_JUMPS} <= set(plan)
    assert len(plan) == 4 + 2 * len(REFERENCE_POINTS)


def test_random_mixed_schedules_draw_outages_of_both_lengths_and_clock_jumps() -> None:
    actions = {f.action for _, s in mixed_schedules(3, 300, REFERENCE_POINTS) for f in s}
    assert set(LENGTHS) <= actions and set(CLOCK_JUMPS) <= actions


def test_flaky_services_draws_outages_in_its_single_faults_and_its_random_ones() -> None:
    from types import SimpleNamespace

    from killpoint.scenarios.flaky_services import FlakyServices

    class OnThesePoints(FlakyServices):
        def step_points(self, ctx):  # type: ignore[no-untyped-def, override]
            return REFERENCE_POINTS

        def occurrences(self, ctx):  # type: ignore[no-untyped-def, override]
            return {}  # each point reached once

    ctx = SimpleNamespace(seed=5, actions=())
    drawn = {f.action for _, s in OnThesePoints().random_plan(ctx, 40) for f in s}  # type: ignore[arg-type]
    assert set(LENGTHS) <= drawn


def test_a_lasting_fault_shrinks_and_shards_like_any_other() -> None:
    big = Schedule.parse("plan:step.start:term,charge:effect.received:outage=5,email:effect.received:error,"
                         "charge:checkpoint.writing:clock+366d", REFERENCE_POINTS)
    needed = Fault("charge", "checkpoint.writing", "clock+366d")
    assert str(shrink(big, lambda s: needed in s.faults)) == "charge:checkpoint.writing:clock+366d"
    shards = [Shard(k, 3) for k in (1, 2, 3)]
    for s in (big, Schedule.parse("charge:effect.received:outage")):
        assert sum(sh.owns("mixed-faults", s) for sh in shards) == 1
