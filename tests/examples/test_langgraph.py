"""examples/langgraph: an invoice graph on LangGraph (PostgresSaver), crash-tested as written, through the
CLI with `--adapter langgraph`: the bare email's duplicate is found by exactly_once with a replay line that
reproduces it, and the keyed email passes `killpoint run` (every applicable scenario) with no UNKNOWN."""

from __future__ import annotations

import pytest

pytest.importorskip("langgraph.checkpoint.postgres", reason="langgraph and langgraph-checkpoint-postgres are not "
                    "installed: pip install 'killpoint[langgraph]'")
pytest.importorskip("resend", reason="the resend SDK is not installed: pip install 'killpoint[langgraph]'")

from tests.examples.frameworks import assert_duplicate_found, assert_keyed_passes  # noqa: E402

EXAMPLE = "langgraph/invoice_graph.py"


def test_bare_email_duplicate_is_found_and_its_replay_reproduces_it(sandbox):
    assert_duplicate_found(sandbox, "langgraph", EXAMPLE)


@pytest.mark.slow
def test_keyed_email_passes_the_whole_suite(sandbox):
    assert_keyed_passes(sandbox, "langgraph", EXAMPLE)
