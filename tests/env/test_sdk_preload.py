"""A fork server imports the anthropic SDK ahead only for step modules whose steps may call the model
(`model_calls.may_call_model`): its `ready` line says which, its forked workers hold the SDK's libraries or
not (the pydantic-core library mapped in their memory), and runs pass either way, including a step module
that reaches the model by a name no reading of its code can see (its worker builds the client at its first
call). Without the test session's zygotes, which import the SDK for every server they fork."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from killpoint.env.fork_launcher import ForkLauncher
from killpoint.env.postgres import PostgresHandle
from killpoint.faults.schedule import Schedule
from tests.helpers.harness import harness_session
from tests.helpers.sandbox import without_zygote

SDK_LIBRARY = "_pydantic_core"
"""A shared library the SDK's import maps (through pydantic) and the reference runtime's does not."""


def maps_sdk(pid: int) -> bool | None:
    """Whether process `pid` has the SDK's library mapped; None if it is gone."""
    try:
        return SDK_LIBRARY in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return None


@pytest.fixture(scope="module", autouse=True)
def own_servers() -> Iterator[None]:
    with without_zygote():
        yield


@pytest.mark.parametrize(("steps", "schedule", "sdk", "asks"), [
    ("tests.corpus.no_model", "charge:effect.applied:kill", False, False),
    ("tests.gallery.model_reach.rules_only", "plan:checkpoint.committed:kill", False, False),
    ("tests.gallery.model_reach.built_name", "plan:checkpoint.committed:kill", False, True),
    ("tests.gallery.model_reach.via_helper", "plan:checkpoint.committed:kill", True, True),
])
def test_the_sdk_is_preloaded_only_where_a_step_may_call_the_model(
        pg_server: PostgresHandle, tmp_path: Path, steps: str, schedule: str, sdk: bool, asks: bool) -> None:
    db = "sdk_" + steps.rsplit(".", 1)[-1]
    with harness_session(pg_server, tmp_path / "run", db, steps=steps) as session:
        launcher = session.env.launcher
        assert isinstance(launcher, ForkLauncher)
        assert [report.get("sdk") for report in launcher.reports] == [sdk, sdk]
        assert all(maps_sdk(pid) is sdk for pid in launcher.server_pids)
        session.baseline()
        standbys = [maps_sdk(server.standby) for server in launcher._servers if server.standby]
        seen = [mapped for mapped in standbys if mapped is not None]  # each waits for its spawn: none is gone
        assert seen and all(mapped is sdk for mapped in seen), standbys
        trial = session.trial(Schedule.parse(schedule))
        assert trial.outcome == "pass", trial.verdicts
        assert bool(trial.evidence.model_requests) is asks, trial.evidence.model_requests
