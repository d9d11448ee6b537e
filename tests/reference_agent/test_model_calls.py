"""`model_calls.may_call_model` (whether a worker builds the SDK ahead and a fork server imports it) and the
model client built on first use (`Resources.sdk`).

Each path by which a step reaches `ctx.model` is a "yes"; agents that only look like model agents are a
"no"; the one path no reading of code can see (a name built at run time) is a "no" whose cost is time."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from killpoint.reference_agent import model_calls
from killpoint.reference_agent.model_calls import may_call_model

NOTHING_IMPORTED: frozenset[str] = frozenset()
"""As in a fork server that has not imported the SDK (this test process may have)."""


@pytest.mark.parametrize(("module", "expected"), [
    ("killpoint.reference_agent.invoice_agent", True),      # `ctx.model.ask` in its own steps
    ("tests.gallery.model_reach.via_helper", True),         # in a helper module of its package
    ("tests.gallery.model_reach.via_table", True),          # in a callable class's instance, STEPS a table
    ("tests.gallery.model_reach.via_getattr", True),        # getattr(ctx, CLIENT), CLIENT = "model"
    ("tests.corpus.uuid5_keys", True),                      # the reference agent's steps, wrapped
    ("tests.gallery.variants.hangs_always", True),          # `_STEPS["record"]`: the whole table it names
    ("tests.corpus.no_model", False),                       # the reference agent's steps, plan and validate replaced
    ("tests.gallery.model_reach.rules_only", False),        # `model_name`, `models`, `model=`: no client
    ("tests.gallery.variants.sms_agent", False),            # effects only
    ("tests.gallery.model_reach.built_name", False),        # unseeable: costs time, not correctness
])
def test_which_step_modules_may_call_the_model(module: str, expected: bool) -> None:
    assert may_call_model([importlib.import_module(module)], NOTHING_IMPORTED) is expected


def test_an_agent_on_another_sdk_whose_library_says_model_is_a_no() -> None:
    """The OpenAI Agents example: its library's own `Agent.model` is not the runtime's client, and the
    library's code is not followed (`library`)."""
    pytest.importorskip("agents")
    example = importlib.import_module("examples.tool_agents.openai_agents_billing")
    assert may_call_model([example], NOTHING_IMPORTED) is False


@pytest.mark.parametrize(("name", "own", "expected"), [
    ("json", set(), True),                                       # the standard library
    ("psycopg", set(), True),                                    # installed
    ("psycopg", {"psycopg"}, False),                             # ... unless it is the step module's own package
    ("killpoint.reference_agent.invoice_agent", set(), False),   # the reference agent's steps, wherever installed
    ("tests.gallery.model_reach.advice", set(), False),          # the project's own code, on the import path
    ("builtins", set(), True),                                   # no file
])
def test_what_counts_as_a_library(name: str, own: set[str], expected: bool) -> None:
    importlib.import_module(name)
    assert model_calls.library(name, own) is expected


def test_reading_a_step_module_runs_none_of_its_code() -> None:
    """A module `__getattr__`, a metaclass's `__getattribute__`, a table's own `values()`, a lying `__class__`,
    a property: the answer (yes: `plan` asks through a class's method) comes without running any of them."""
    trapped = importlib.import_module("tests.gallery.model_reach.booby_trapped")
    trapped.TRIPPED.clear()
    assert may_call_model([trapped], NOTHING_IMPORTED) is True
    assert trapped.TRIPPED == []


def test_a_module_that_imported_the_sdk_itself_is_a_yes() -> None:
    no_model = importlib.import_module("tests.corpus.no_model")
    assert may_call_model([no_model], {"anthropic"}) is True


def test_any_step_module_of_several_that_may_call_the_model_makes_it_a_yes() -> None:
    modules = [importlib.import_module(m) for m in ("tests.corpus.no_model", "tests.gallery.model_reach.via_helper")]
    assert may_call_model(modules, NOTHING_IMPORTED) is True


def test_past_the_limit_it_says_yes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_calls, "LIMIT", 1)
    monkeypatch.setattr(model_calls, "_answers", {})
    assert may_call_model([importlib.import_module("tests.gallery.model_reach.rules_only")], NOTHING_IMPORTED)


def run_fresh(code: str) -> str:
    """`code`'s output in a fresh interpreter (one that has imported nothing of the SDK)."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_the_model_client_is_built_and_the_sdk_imported_on_first_use_only() -> None:
    """A worker whose steps never call the model never imports the SDK; one step's first call builds it,
    and a run's own copy (a `{run_id}` URL) is built from it on its first call."""
    assert run_fresh("""
import sys
from killpoint.reference_agent.context import Resources
env = {"MAILER_URL": "http://127.0.0.1:9", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9/runs/{run_id}"}
resources = Resources(None, env)
ctx = resources.context("r-1", "plan", 0, lambda name: None)
before = "anthropic" in sys.modules
sdk = ctx.model.sdk
print(before, "anthropic" in sys.modules, str(sdk.base_url).rstrip("/"), resources._sdk is not None)
resources.close()
""") == "False True http://127.0.0.1:9/runs/r-1 True"


def test_a_resources_never_used_for_the_model_closes_without_building_it() -> None:
    assert run_fresh("""
import sys
from killpoint.reference_agent.context import Resources
resources = Resources(None, {"MAILER_URL": "http://127.0.0.1:9", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"})
resources.close()
print("anthropic" in sys.modules)
""") == "False"
