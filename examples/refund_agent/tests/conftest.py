"""Point killpoint's pytest plugin at Acme's agent (instead of passing --killpoint-steps each time)."""

import pytest


@pytest.fixture(scope="session")
def killpoint_steps() -> str:
    return "acme_refunds.steps"
