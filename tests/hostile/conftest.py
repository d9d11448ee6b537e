"""The hostile tests run every session the way a user's does: no zygote (tests/conftest.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from killpoint.env.zygote import ZYGOTE_VAR


@pytest.fixture(scope="package", autouse=True)
def no_zygote() -> Iterator[None]:
    """These tests are about how a session's processes start and end when things go wrong (a harness
    SIGKILLed, a fork server killed while importing, a Ctrl-C at start-up): they need the fork servers the
    harness starts itself, which import the agent and die with it by their parent-death signal, not servers
    forked from a zygote of the test process."""
    saved = os.environ.pop(ZYGOTE_VAR, None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ[ZYGOTE_VAR] = saved
