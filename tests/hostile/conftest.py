"""The hostile tests about how a session's processes start and end run every session the way a user's does:
no zygote (tests/conftest.py). The others (bad input, hostile databases and outputs, libpq's environment,
a user's database) are about what a session says and leaves, which a server forked from a zygote does not
change: they use the zygotes, like the rest of the suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.sandbox import without_zygote

REAL_START = {
    "test_credentials": "what a worker sees at import: a zygote imported the SDK before the session's keys",
    "test_egress": "connections made while the step module and SDK are imported, behind the guard",
    "test_environment": "the processes a session stands on, killed under it",
    "test_forkserver_protocol": "the fork server's descriptors, as the harness makes them",
    "test_hostile_imports": "the step module's probe in a fresh interpreter (test_zygote covers the forked one)",
    "test_interruptions": "Ctrl-C and SIGTERM reaching the fork servers the harness started",
    "test_namespaces": "the reaper's view of a session's processes",
    "test_restarted_server": "a SIGKILLed harness's descendants",
    "test_startup_interrupt": "Ctrl-C while the fork servers start",
    "test_thread_left_running": "how a real interpreter and a forked worker end",
}
"""The modules whose sessions start their fork servers themselves, and why."""


@pytest.fixture(scope="module", autouse=True)
def real_start(request: pytest.FixtureRequest) -> Iterator[None]:
    """Without the zygotes for the modules of `REAL_START`: they are about how a session's processes start
    and end when things go wrong, and need the fork servers the harness starts itself."""
    if request.module.__name__.rpartition(".")[2] in REAL_START:
        with without_zygote():
            yield
    else:
        yield
