"""Incarnations differ like real restarts: a resumed incarnation never shares the hash seed of the one it
replaces (harness/env/launcher.py `HASH_SEEDS`, `IncarnationSeeds`).

The fork launcher keeps one fork server per seed and forks the n-th incarnation of a run from server
n % 2; an exec'd worker is given the same seed in its `PYTHONHASHSEED`. The observable outcome: the
`hash_key` mutant (tests/gallery/mutants/hash_key.py), whose charge key ends with `hash()` of the invoice,
charges twice after a kill, in fork mode, by the default command; the reference agent passes the same trial.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from killpoint.env.fork_launcher import ForkLauncher
from killpoint.env.launcher import HASH_SEEDS, IncarnationSeeds
from killpoint.env.postgres import PostgresHandle
from killpoint.faults.schedule import Schedule
from killpoint.run.trial import Session
from tests.gallery.mutants import BY_NAME
from tests.helpers.harness import harness_session
from tests.helpers.sandbox import Sandbox

HASH_KEY = BY_NAME["hash_key"]


def test_the_incarnations_of_a_run_take_the_seeds_in_turn() -> None:
    seeds = IncarnationSeeds()
    assert len(set(HASH_SEEDS)) == len(HASH_SEEDS) >= 2 and 0 not in HASH_SEEDS
    assert [seeds.next("r1") for _ in range(4)] == [0, 1, 0, 1]
    assert seeds.next("r2") == 0  # every run starts on the first seed, as its crash-free run did
    assert seeds.next("r1") == 0


@pytest.fixture(scope="module")
def hash_session(pg_server: PostgresHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    with harness_session(pg_server, tmp_path_factory.mktemp("hash"), "test_seeds_hash", steps=HASH_KEY.module) as s:
        yield s


def test_a_resumed_incarnation_is_forked_with_another_hash_seed(hash_session: Session) -> None:
    launcher = hash_session.env.launcher
    assert isinstance(launcher, ForkLauncher) and len(set(launcher.server_pids)) == len(HASH_SEEDS)
    trial = hash_session.trial(Schedule.parse(HASH_KEY.schedule, hash_session.agent.steps))
    assert trial.outcome == "fail", trial.verdicts
    (exactly_once,) = [v for v in trial.verdicts if v.checker == "exactly_once"]
    assert exactly_once.outcome == "fail" and "twice" in exactly_once.reason, exactly_once


@pytest.mark.slow
def test_a_plain_run_of_crash_points_catches_a_hash_key(sandbox: Sandbox) -> None:
    """`killpoint run --steps` with nothing but the scenario picked (crash-points, the first scenario of a
    plain run): the exhaustive plan finds the double charge in fork mode, no `--spawn exec` needed."""
    done = sandbox.run("run", "--scenario", "crash-points", "--steps", HASH_KEY.module, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "exactly_once: fail" in done.stdout
    assert "Traceback" not in done.stderr
