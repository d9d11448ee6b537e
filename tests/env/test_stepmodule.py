"""The step-module contract: a module that breaks it is refused with one line naming what is missing and
the fix (exit 2 from the CLI, no traceback, nothing left running); a good one loads with its shape."""

from __future__ import annotations

import json
import subprocess
import sys
import types

import pytest

from killpoint.env.stepmodule import DEFAULT_STEPS, check, load
from killpoint.errors import UsageError
from killpoint.reference_agent import invoice_agent
from tests.helpers.checks import describe
from tests.helpers.sandbox import Sandbox

# module under tests/gallery/invalid -> (what the line must name, what the fix must say)
BAD_MODULES = {
    "no_steps": ("has no STEPS", "define STEPS = {cursor: step_callable"),
    "start_not_step": ("START = 'begin', which is not a step", "one of the STEPS keys: plan"),
    "step_not_callable": ("step 'plan' that is not callable", "make each STEPS value a function"),
    "no_state_version": ("has no STATE_VERSION", "define STATE_VERSION = 1"),
    "missing_dependency": ("imports 'killpoint_no_such_dependency', which is not installed",
                           "install killpoint_no_such_dependency"),
    "raises_on_import": ("raised RuntimeError: configuration file agent.toml not found",
                         "python -c 'import tests.gallery.invalid.raises_on_import'"),
    "does_not_exist": ("step module 'tests.gallery.invalid.does_not_exist' cannot be imported", "give a dotted module path"),
}


@pytest.mark.parametrize("name", sorted(BAD_MODULES))
def test_load_refuses_with_what_and_fix(name: str) -> None:
    what, fix = BAD_MODULES[name]
    with pytest.raises(UsageError) as info:
        load(f"tests.gallery.invalid.{name}")
    err = info.value
    assert err.code == "bad-steps-module" and err.exit_code == 2
    assert what in err.message and fix in err.fix, err.line()
    assert "\n" not in err.line()


def _module(**attrs: object) -> types.ModuleType:
    mod = types.ModuleType("fake_agent")
    base = {"START": "a", "STEPS": {"a": lambda cp, ctx: None}, "STATE_VERSION": 1, "initial_state": lambda p: {}}
    for k, v in {**base, **attrs}.items():
        if v is not None:
            setattr(mod, k, v)
    return mod


@pytest.mark.parametrize(("attrs", "words"), [
    ({"STEPS": {}}, "has no STEPS"),
    ({"STEPS": [("a", print)]}, "has no STEPS"),
    ({"STEPS": {"a": print, "done": print}}, "a step named 'done'"),
    ({"STATE_VERSION": "3"}, "STATE_VERSION = '3', not an int"),
    ({"STATE_VERSION": 0}, "STATE_VERSION = 0, not an int"),
    ({"STATE_VERSION": True}, "STATE_VERSION = True, not an int"),
    ({"initial_state": {}}, "has no initial_state"),
    ({"MIGRATIONS": {"1": print}}, "MIGRATIONS that is not {version: callable}"),
])
def test_check_names_each_violation(attrs: dict, words: str) -> None:
    with pytest.raises(UsageError) as info:
        check(_module(**attrs), "fake_agent")
    assert words in info.value.message, info.value.line()


def test_reference_agent_loads() -> None:
    spec = load(DEFAULT_STEPS)
    assert spec.start == "plan" and spec.steps == tuple(invoice_agent.STEPS)
    assert spec.state_version == invoice_agent.STATE_VERSION and len(spec.digest) == 16
    assert load("tests.gallery.variants.no_email_key").digest != spec.digest


@pytest.mark.parametrize("name", sorted(BAD_MODULES))
def test_cli_refuses_bad_step_module(sandbox: Sandbox, name: str) -> None:
    what, fix = BAD_MODULES[name]
    proc = sandbox.run("run", "--scenario", "crash-points", "--steps", f"tests.gallery.invalid.{name}",
                       "--out", str(sandbox.out))
    assert proc.returncode == 2, describe(proc)
    assert "Traceback" not in proc.stderr + proc.stdout, describe(proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, describe(proc)
    assert lines[0].startswith("killpoint: error[bad-steps-module]: ")
    message, _, given_fix = lines[0].partition(". Fix: ")
    assert what in message and fix in given_fix, lines[0]
    assert sandbox.survivors() == [] and sandbox.leftover_dirs() == []


PROBES = """
import json, sys
from killpoint.env import stepmodule
probed = []
real = stepmodule.probe
stepmodule.probe = lambda module, limit: (probed.append(module), real(module, limit))
for module in sys.argv[1:] * 2:  # a second load of each reads the first's probe
    stepmodule.load(module)
print(json.dumps(probed))
"""


def test_only_a_users_step_module_is_imported_first_in_a_probe(sandbox: Sandbox) -> None:
    """killpoint's own agent runs none of the user's code: a session on it starts without the probe's child
    interpreter (~0.25 s of start-up); a user's module, and a killpoint look-alike name, are still probed,
    once each however often the session loads them (the probe's spec is kept: the harness does not import them)."""
    (sandbox.cwd / "killpointish.py").write_text("from killpoint.reference_agent.invoice_agent import *  # noqa\n"
                                                 "from killpoint.reference_agent.invoice_agent import STEPS, START, "
                                                 "STATE_VERSION, MIGRATIONS, OWN_EFFECTS_SQL, initial_state\n")
    done = subprocess.run([sys.executable, "-c", PROBES, DEFAULT_STEPS, "killpointish",
                           "tests.gallery.variants.no_email_key"], capture_output=True, text=True,
                          cwd=sandbox.cwd, env=sandbox.env(), timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, describe(done)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ["killpointish", "tests.gallery.variants.no_email_key"]


LOADS = """
import json, sys
from killpoint.env import stepmodule
agent = stepmodule.load(sys.argv[1])
seen = {"after_load": sys.argv[1] in sys.modules, "steps": list(agent.steps)}
seen["script"] = stepmodule.model_script(agent)
seen["after_script"] = sys.argv[1] in sys.modules
print(json.dumps(seen, default=lambda f: f"function {f.__name__}"))
"""

SCRIPTED = """
import os
from killpoint.reference_agent.invoice_agent import STEPS, START, STATE_VERSION, MIGRATIONS, initial_state
open(os.path.join(os.path.dirname(__file__), "imported.txt"), "a").write(f"{os.getpid()}\\n")
MODEL_SCRIPT = {SCRIPT}
"""


@pytest.mark.parametrize("script", ["[{'say': 'ok'}]", "None", "lambda request: {'say': 'ok'}"],
                         ids=["table", "none", "function"])
def test_a_users_module_is_read_from_its_probe_not_imported_by_the_harness(sandbox: Sandbox, script: str) -> None:
    """The probe's child imports and checks a user's step module once, and its report is the module's spec
    (steps, digest, a MODEL_SCRIPT that is data): the harness does not import it again (a framework's import
    is seconds: issue 28). Only what must run in the harness (a MODEL_SCRIPT function; `setup`) imports it."""
    (sandbox.cwd / "scripted_agent.py").write_text(SCRIPTED.replace("{SCRIPT}", script))
    done = subprocess.run([sys.executable, "-c", LOADS, "scripted_agent"], capture_output=True, text=True,
                          cwd=sandbox.cwd, env=sandbox.env(), timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, describe(done)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["steps"] == list(invoice_agent.STEPS) and seen["after_load"] is False, seen
    imports = (sandbox.cwd / "imported.txt").read_text().split()
    if script == "lambda request: {'say': 'ok'}":  # a function answers in the harness's fakes: imported there
        assert seen["script"] == "function <lambda>" and seen["after_script"] is True, seen
        assert len(imports) == 2, imports  # the probe's, then the harness's
    else:
        assert seen["script"] == eval(script) and seen["after_script"] is False, seen  # noqa: S307 - our literal
        assert len(imports) == 1, imports  # the probe's only
