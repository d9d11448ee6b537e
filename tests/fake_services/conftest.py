"""Fixtures the fake-service tests share: why each exists is in its docstring."""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
import pytest

from killpoint.fake_services import Services


@pytest.fixture
def svc() -> Iterator[Services]:
    """Every fake service on its own 127.0.0.1 port, started fresh for each test so records never carry over
    from one test to the next, and stopped (servers joined, ports freed) after it."""
    with Services.start() as services:
        yield services


@pytest.fixture
def client() -> Iterator[httpx2.Client]:
    """A plain HTTP client with a short timeout: a fake that hangs fails the test instead of stalling it."""
    with httpx2.Client(timeout=5) as c:
        yield c
