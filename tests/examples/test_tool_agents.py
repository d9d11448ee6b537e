"""examples/tool_agents: agents whose tool calls make the side effects, on three real frameworks, crash-tested
through the CLI at the tool call (one targeted schedule each, not the whole suite: these frameworks import
slowly, and the suite's time is shared):

- LangGraph's prebuilt ReAct agent (``langchain-openai``, PostgresSaver; ``--adapter langgraph``), whose
  tool emails the customer with the resend SDK: killed after Resend sent it (``tools:effect.applied``);
- a Pydantic AI agent made durable by its DBOS integration (``--adapter dbos``), whose tool pays a refund
  through the ledger: killed after the ledger paid (``refunds__model.request:effect.applied``: DBOS records
  the tool's work under the model-request step, the last one before it);
- an OpenAI Agents SDK agent in a step module (the reference runtime), whose tool charges a card with the
  stripe SDK: killed after Stripe charged it (``bill:effect.applied``);
- the Anthropic SDK's own tool loop in a step module (``think``/``act`` steps that loop, a checkpoint per
  turn), whose tool refunds through the ledger: killed after the ledger paid (``act:effect.applied``).

Each keyed (the tool's effect keyed with the run and the model's tool call id) passes with the effect made
exactly once, with the arguments the model script pinned; each bare (no key) is caught by ``exactly_once``
with a replay line naming the same schedule and worker. Each sandbox is left with no survivor. The keyed
ReAct agent's checkpointer (examples/tool_agents/monotonic_saver.py) also resumes on a worker whose clock is an
hour behind (`mixed-faults`' ``tools:checkpoint.writing:clock-1h``).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass

import pytest

from killpoint.adapters.langgraph import CLOCK_NOTE
from tests.examples.frameworks import KEYED_PASS, KEYED_SKIP, SCENARIO_LINE, worker_cmd
from tests.helpers import REPO
from tests.helpers.checks import describe, failing_checkers
from tests.helpers.sandbox import Sandbox

EXAMPLES = REPO / "examples" / "tool_agents"
SCRIPT = EXAMPLES / "model_script.toml"
REPLAY = re.compile(r"reproduce the first failure with:\n\s+(killpoint replay .*)")


@dataclass(frozen=True)
class Example:
    """One example and how to run it: the modules it needs, the CLI arguments of its keyed and its bare
    variant, the schedule that kills at its tool's effect, and the effect's service and pinned payload."""

    name: str
    needs: tuple[str, ...]
    keyed: tuple[str, ...]
    bare: tuple[str, ...]
    schedule: str
    service: str
    payload: dict


def worker(file: str, adapter: str, keyed: bool) -> tuple[str, ...]:
    return ("--adapter", adapter, "--worker-cmd", worker_cmd(f"tool_agents/{file}", keyed))


EXAMPLES_UNDER_TEST = [
    Example("langgraph-react", ("langgraph.prebuilt", "langgraph.checkpoint.postgres", "langchain_openai", "resend"),
            worker("react_agent.py", "langgraph", True), worker("react_agent.py", "langgraph", False),
            "tools:effect.applied:kill", "resend",
            {"to": ["ada@example.com"], "html": "<p>Your refund of 42.00 USD is on its way.</p>"}),
    Example("pydantic-ai-dbos", ("pydantic_ai.durable_exec.dbos", "anthropic", "dbos"),
            worker("pydantic_ai_refunds.py", "dbos", True), worker("pydantic_ai_refunds.py", "dbos", False),
            "refunds__model.request:effect.applied:kill", "ledger", {"account": "A-17", "amount_cents": 4200}),
    Example("anthropic-tool-loop", ("anthropic",), ("--steps", "anthropic_tool_loop"),
            ("--steps", "anthropic_tool_loop_keyless"), "act:effect.applied:kill", "ledger",
            {"account": "A-17", "amount_cents": 4200}),
    Example("openai-agents", ("agents", "stripe"), ("--steps", "openai_agents_billing"),
            ("--steps", "openai_agents_billing_keyless"), "bill:effect.applied:kill", "stripe",
            {"amount": "12500", "metadata": {"order": "A-17"}}),
]


def killpoint(box: Sandbox, *args: str) -> subprocess.CompletedProcess[str]:
    """`killpoint ARGS` in the sandbox, with the examples' model script and the step modules importable (the
    frameworks import slowly on a busy machine: the step module's import may take longer than the default)."""
    return box.run(*args, "--out", str(box.out), timeout=900, path_first=(EXAMPLES,),
                   env={"KILLPOINT_MODEL_SCRIPT": str(SCRIPT), "KILLPOINT_IMPORT_TIMEOUT": "300"})


def effects(box: Sandbox, run_id: str, service: str) -> list[dict]:
    return [e["record"] for e in box.events() if e["type"] == "effect" and e["record"]["run_id"] == run_id
            and e["record"]["service"] == service]


def needs(example: Example) -> None:
    for module in example.needs:
        pytest.importorskip(module, reason=f"{module} is not installed: pip install 'killpoint[tool-agents]'")


@pytest.mark.parametrize("example", EXAMPLES_UNDER_TEST, ids=lambda e: e.name)
def test_keyed_tool_effect_is_made_once_when_killed_after_it(example: Example, sandbox: Sandbox) -> None:
    needs(example)
    proc = killpoint(sandbox, "replay", "--scenario", "crash-points", "--schedule", example.schedule, *example.keyed)
    assert proc.returncode == 0, describe(proc)
    assert re.search(r"^PASS\s+crash-points", proc.stdout, re.MULTILINE), describe(proc)
    assert "never reached" not in proc.stdout and "UNKNOWN" not in proc.stdout, describe(proc)
    faults = [e for e in sandbox.events() if e["type"] == "fault"]
    assert len(faults) == 1, faults
    made = effects(sandbox, faults[0]["run_id"], example.service)
    assert len(made) == 1 and made[0]["key"], made  # the killed run's effect, made once, under its key
    assert example.payload.items() <= made[0]["payload"].items(), made[0]["payload"]
    assert not sandbox.survivors(), sandbox.survivors()


@pytest.mark.parametrize("example", EXAMPLES_UNDER_TEST, ids=lambda e: e.name)
def test_bare_tool_effect_is_made_twice_and_exactly_once_says_so(example: Example, sandbox: Sandbox) -> None:
    needs(example)
    proc = killpoint(sandbox, "replay", "--scenario", "crash-points", "--schedule", example.schedule, *example.bare)
    assert proc.returncode == 1, describe(proc)
    assert "exactly_once" in failing_checkers(proc.stdout) and "effects done twice" in proc.stdout, describe(proc)
    assert re.search(rf"extra x1: {example.service} ", proc.stdout), describe(proc)
    line = REPLAY.search(proc.stdout)
    assert line and f"--schedule '{example.schedule}'" in line.group(1), describe(proc)
    assert all(arg in line.group(1) for arg in example.bare if not arg.startswith("/")), line.group(1)
    assert not sandbox.survivors(), sandbox.survivors()


STEP_MODULE_EXAMPLES = [e for e in EXAMPLES_UNDER_TEST if e.name in ("anthropic-tool-loop", "openai-agents")]


@pytest.mark.slow  # the whole default suite, on a step module (the fork server makes it a few minutes)
@pytest.mark.parametrize("example", STEP_MODULE_EXAMPLES, ids=lambda e: e.name)
def test_keyed_step_module_tool_agent_passes_the_whole_suite(example: Example, sandbox: Sandbox) -> None:
    """A tool-using agent written as a step module (its tool loop looping over steps, or inside one step)
    passes every scenario of `killpoint run`: exit 0, no UNKNOWN, no FAIL (issue 22's "keyed variant passes
    the whole suite"; figures in docs/tools.md). The OpenAI Agents SDK example is one step around the SDK's
    whole tool loop: schema-upgrade (PASS where git has the module's previous version, else SKIP) tests it
    by a kill after its charge, there being no step boundary to pause at."""
    needs(example)
    proc = killpoint(sandbox, "run", "--seed", "1", "--budget", "2", *example.keyed)
    assert proc.returncode == 0, describe(proc)
    outcomes = {name: outcome for outcome, name in SCENARIO_LINE.findall(proc.stdout)}
    assert outcomes and set(outcomes.values()) <= {"PASS", "SKIP"}, describe(proc)
    assert outcomes["crash-points"] == outcomes["mixed-faults"] == "PASS", outcomes
    assert not sandbox.survivors(), sandbox.survivors()


def test_keyed_langgraph_react_agent_resumes_on_a_clock_stepped_back(sandbox: Sandbox) -> None:
    """The keyed ReAct agent's MonotonicPostgresSaver (examples/tool_agents/monotonic_saver.py) stores a
    resumed worker's checkpoints above the thread's latest though its clock is an hour behind: killed after
    checkpointing the tool call, resumed at `clock-1h`, the thread finishes with the email sent once and no
    runtime note on checkpoint ids that sort below their parent; the resume is forked from the fork servers
    under libfaketime. (With PostgresSaver it never finished:
    every resume loaded the step before and redid it; tests/examples/test_langgraph.py keeps that hazard.)"""
    example = next(e for e in EXAMPLES_UNDER_TEST if e.name == "langgraph-react")
    needs(example)
    proc = killpoint(sandbox, "replay", "--scenario", "mixed-faults", "--schedule",
                     "tools:checkpoint.writing:clock-1h", *example.keyed)
    assert proc.returncode == 0, describe(proc)
    assert re.search(r"^PASS\s+mixed-faults", proc.stdout, re.MULTILINE), describe(proc)
    assert CLOCK_NOTE.split("{", 1)[0] not in proc.stdout and "UNKNOWN" not in proc.stdout, describe(proc)
    said = proc.stdout + proc.stderr  # the resume an hour behind was forked, under libfaketime
    assert "worker-cmd: incarnations under a clock fault's shift forked from servers under libfaketime" in said, said
    faults = [e for e in sandbox.events() if e["type"] == "fault"]
    assert [f["action"] for f in faults] == ["clock-1h"], faults
    made = effects(sandbox, faults[0]["run_id"], example.service)
    assert len(made) == 1 and made[0]["key"], made
    assert not sandbox.survivors(), sandbox.survivors()


@pytest.mark.slow  # the whole default suite on a framework's worker: 10-20 minutes on a busy 2-core machine
def test_keyed_langgraph_react_agent_passes_the_whole_suite(sandbox: Sandbox) -> None:
    """`killpoint run --budget 1` on the keyed LangGraph ReAct agent: exit 0, every scenario PASS or SKIP (the
    ones a black-box worker cannot serve, with their reason), no UNKNOWN. mixed-faults among the PASSes: its
    backward clock jumps resume the thread on a worker an hour behind, which MonotonicPostgresSaver makes safe
    (PostgresSaver alone FAILs there, as examples/langgraph does in tests/examples/test_langgraph.py).
    deploy-drain among the PASSes: its trials run one at a time for a black-box worker (eight framework
    imports at once outran the run's time budget, and every trial had FAILed as hung). Its emails, sent
    through the resend SDK preloaded by the fork servers, reach each run's own fake (harness/env/stand_ins.py):
    else the runs' emails would be missing or another run's, and its scenarios would not PASS."""
    example = next(e for e in EXAMPLES_UNDER_TEST if e.name == "langgraph-react")
    needs(example)
    proc = killpoint(sandbox, "run", "--seed", "1", "--budget", "1", *example.keyed)
    outcomes = {name: outcome for outcome, name in SCENARIO_LINE.findall(proc.stdout)}
    assert proc.returncode == 0, describe(proc)
    assert outcomes and set(outcomes.values()) <= {"PASS", "SKIP"} and "UNKNOWN" not in proc.stdout, describe(proc)
    assert all(outcomes.get(n) == "PASS" for n in (*KEYED_PASS, "mixed-faults")), outcomes
    assert all(outcomes.get(n) == "SKIP" for n in KEYED_SKIP), outcomes
    # resend reads RESEND_API_URL, per run, at import: preloaded all the same, each incarnation's own bound.
    assert "RESEND_API_URL, read at import, is each incarnation's own in resend.api_url" in proc.stdout + proc.stderr
    assert not sandbox.survivors(), sandbox.survivors()


@pytest.mark.slow
def test_keyed_pydantic_ai_dbos_agent_passes_the_whole_suite_runs_side_by_side(sandbox: Sandbox) -> None:
    """`killpoint run --budget 1` on the keyed Pydantic AI DBOS agent: exit 0, every scenario PASS or SKIP,
    no UNKNOWN. Its runs go two at a time or more (the default `-j`: more while DBOS's polling leaves the
    cores idle) on one DBOS system database, kept apart by the adapter's fence (harness/adapters/dbos.py,
    point 7): a resumed run's workflow, re-enqueued by DBOS's recovery, is left to that run's own process,
    never run by another run's (which would make its refund under the wrong run)."""
    example = next(e for e in EXAMPLES_UNDER_TEST if e.name == "pydantic-ai-dbos")
    needs(example)
    proc = killpoint(sandbox, "run", "--seed", "1", "--budget", "1", *example.keyed)
    outcomes = {name: outcome for outcome, name in SCENARIO_LINE.findall(proc.stdout)}
    assert proc.returncode == 0, describe(proc)
    assert outcomes and set(outcomes.values()) <= {"PASS", "SKIP"} and "UNKNOWN" not in proc.stdout, describe(proc)
    assert all(outcomes.get(n) == "PASS" for n in (*KEYED_PASS, "mixed-faults")), outcomes
    assert all(outcomes.get(n) == "SKIP" for n in KEYED_SKIP), outcomes
    assert "one run at a time" not in proc.stdout, describe(proc)
    # Pydantic AI loads its price table when it first prices an answer: learned from the first incarnations.
    assert re.search(r"worker-cmd: also preloaded, as incarnations imported them: .*genai_prices\.",
                     proc.stdout + proc.stderr), describe(proc)
    assert not sandbox.survivors(), sandbox.survivors()
