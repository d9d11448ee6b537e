"""`error` and `overload` at `effect.applied`: the ambiguous failure (the service applied the request, then
answered 5xx or its overload answer). They parse, are generated wherever service faults are, and replay
through the CLI: the reference agent retries with its key (replayed, not applied twice); an agent that
rekeys its retries is caught by exactly_once, and the printed replay line reproduces it."""

from __future__ import annotations

import shlex
from collections.abc import Iterator

import pytest

from killpoint.env.postgres import PostgresHandle
from killpoint.faults.mixed import mixed_schedules, pairs
from killpoint.faults.points import fits
from killpoint.faults.schedule import Schedule, exhaustive
from killpoint.faults.shrink import shrink
from killpoint.faults.strategies import candidates
from tests.faults.test_schedule import REFERENCE_POINTS
from tests.helpers.checks import describe, failing_checkers
from tests.helpers.sandbox import Sandbox

REKEYING = "tests.gallery.variants.rekeying_retries"
"""The invoice agent whose ledger client mints a new key for each retry."""


@pytest.mark.parametrize("text", ["email:effect.applied:error", "charge:effect.applied:overload@2"])
def test_they_parse_and_print_back(text: str) -> None:
    assert str(Schedule.parse(text, REFERENCE_POINTS)) == text


def test_they_fit_only_where_a_request_is_answered() -> None:
    assert fits("error", "effect.applied") and fits("overload", "effect.applied")
    assert not fits("overload", "effect.received")  # unchanged: an overload on arrival is the model's
    assert not fits("error", "checkpoint.writing")


def test_they_are_generated() -> None:
    service = ("error", "drop", "slow", "overload")
    single = {str(s) for s in exhaustive(REFERENCE_POINTS, service)}
    assert {"email:effect.applied:error", "email:effect.applied:overload", "charge:effect.applied:error",
            "charge:effect.applied:overload"} <= single
    assert ("email", "effect.applied", "error") in candidates(REFERENCE_POINTS, service)
    assert any(str(s).startswith("email:effect.applied:error,") for s in pairs(REFERENCE_POINTS))
    drawn = [f for _, s in mixed_schedules(3, 100, REFERENCE_POINTS) for f in s]
    assert any((f.point, f.action) == ("effect.applied", "error") for f in drawn)


def test_a_schedule_shrinks_to_the_ambiguous_failure() -> None:
    big = Schedule.parse("plan:step.start:term,charge:effect.applied:error,email:effect.received:error")
    assert str(shrink(big, lambda s: any(f.point == "effect.applied" for f in s))) == "charge:effect.applied:error"


# ---- through the CLI ---------------------------------------------------------------------------------------

@pytest.fixture
def dsn_args(pg_server: PostgresHandle, sandbox: Sandbox) -> Iterator[list[str]]:
    dsn = pg_server.create_database("test_ambiguous_cli")
    try:
        yield ["--dsn", dsn, "--allow-any-dsn", "--out", str(sandbox.out), "--quiet"]
    finally:
        pg_server.drop_database("test_ambiguous_cli")


def test_the_reference_agent_retries_with_its_key_and_passes(sandbox: Sandbox, dsn_args: list[str]) -> None:
    done = sandbox.run("replay", "--scenario", "flaky-services", "--schedule", "email:effect.applied:error",
                       *dsn_args)
    assert done.returncode == 0, describe(done)
    assert "1 effect retries deduplicated" in done.stdout, describe(done)


def test_a_rekeying_agent_is_caught_and_the_replay_line_reproduces_it(sandbox: Sandbox, dsn_args: list[str]) -> None:
    schedule = "charge:effect.applied:error"
    first = sandbox.run("replay", "--scenario", "flaky-services", "--schedule", schedule, "--steps", REKEYING,
                        *dsn_args)
    assert first.returncode == 1, describe(first)
    assert "exactly_once" in failing_checkers(first.stdout), describe(first)
    assert "exactly_once: fail: effects done twice" in first.stdout, describe(first)
    lines = [ln.strip() for ln in first.stdout.splitlines() if ln.strip().startswith("replay:")]
    assert len(lines) == 1, describe(first)
    argv = shlex.split(lines[0].removeprefix("replay:").strip())
    assert argv[:2] == ["killpoint", "replay"] and schedule in argv and REKEYING in argv, argv
    again = sandbox.run(*argv[1:], *dsn_args)
    assert again.returncode == 1, describe(again)
    assert failing_checkers(again.stdout) == failing_checkers(first.stdout)
