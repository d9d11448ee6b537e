"""killpoint's pytest plugin: options and fixtures only; imports nothing heavy at load time."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("killpoint", "killpoint crash testing")
    group.addoption(
        "--killpoint-postgres",
        action="store",
        default="auto",
        help="Postgres provider for killpoint fixtures: auto|docker|local|embedded|dsn (default: auto)",
    )
    group.addoption(
        "--killpoint-dsn",
        action="store",
        default=None,
        help="DSN of a test database for --killpoint-postgres=dsn",
    )
