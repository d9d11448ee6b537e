"""The hostile tests run every session the way a user's does: no zygote (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.sandbox import without_zygote


@pytest.fixture(scope="package", autouse=True)
def no_zygote() -> Iterator[None]:
    """These tests are about how a session's processes start and end when things go wrong (a harness
    SIGKILLed, a fork server killed while importing, a Ctrl-C at start-up): they need the fork servers the
    harness starts itself, not servers forked from a zygote of the test process."""
    with without_zygote():
        yield
