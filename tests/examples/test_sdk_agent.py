"""The example project `examples/sdk_agent` (package `acme-billing`): an agent on the real stripe, resend and
openai SDKs, unchanged except for their base URLs, crash-tested through the CLI as a user would.

A fresh venv that sees this interpreter's packages (tests/helpers/venvs.py: killpoint, the SDKs, psycopg
and pytest come from this interpreter)
gets the example installed from a copy of its folder; every command runs from a sandbox with nothing on
PYTHONPATH, so `acme_billing` can only come from the venv:

- `killpoint run --steps acme_billing.keyless --scenario crash-points`: the charge has no idempotency key,
  so the charge repeated after a crash is a second charge; `exactly_once` finds it (an extra stripe
  effect), and the replay line it prints, run, fails the same way;
- `killpoint run --steps acme_billing.steps` passes the whole suite (every scenario PASS, or SKIP with a
  reason);
- the black-box worker (`--worker-cmd 'python -m acme_billing.worker {run_id}'`) is caught the same way
  without a key, and survives the same kill with one.

Each sandbox's census must be empty afterwards: no process, no temp dir, no Postgres cluster left behind.
"""

from __future__ import annotations

import re

import pytest

from tests.examples.test_refund_agent import SCENARIO_LINE, Venv, assert_clean
from tests.helpers import REPO
from tests.helpers.checks import REPLAY, cli_args, describe, failing_checkers
from tests.helpers.sandbox import Sandbox

EXAMPLE = REPO / "examples" / "sdk_agent"
pytest.importorskip("stripe")
pytest.importorskip("resend")
pytest.importorskip("openai")
EXTRA_CHARGE = re.compile(r"extra x\d+: stripe POST /v1/\S+ key=\S+ \{\"amount\": \"12500\"")


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """A fresh venv with `acme-billing` installed (`Venv.install`)."""
    return Venv.install(EXAMPLE, "acme_billing", tmp_path_factory.mktemp("sdk-example-venv"))


def test_a_charge_without_a_key_is_charged_twice_and_the_replay_line_reproduces_it(venv: Venv,
                                                                                  sandbox: Sandbox) -> None:
    proc = venv.killpoint(sandbox, "run", "--steps", "acme_billing.keyless", "--scenario", "crash-points")
    assert proc.returncode == 1, describe(proc)
    assert "exactly_once" in failing_checkers(proc.stdout), describe(proc)
    assert EXTRA_CHARGE.search(proc.stdout), describe(proc)
    line = re.search(r"reproduce the first failure with:\n\s+(killpoint replay .*)", proc.stdout)
    assert line and "--steps acme_billing.keyless" in line.group(1), describe(proc)
    again = venv.killpoint(sandbox, *cli_args(line.group(1)))
    assert again.returncode == 1, describe(again)
    assert "exactly_once" in failing_checkers(again.stdout) and EXTRA_CHARGE.search(again.stdout), describe(again)
    assert_clean(sandbox)


@pytest.mark.slow
def test_with_keys_the_whole_suite_passes(venv: Venv, sandbox: Sandbox) -> None:
    proc = venv.killpoint(sandbox, "run", "--steps", "acme_billing.steps", timeout=1500)
    verdict_lines = [line for line in proc.stdout.splitlines() if SCENARIO_LINE.match(line)]
    assert verdict_lines, describe(proc)
    bad = [line for line in verdict_lines if not line.startswith(("PASS", "SKIP"))]
    assert not bad, "scenarios that did not pass:\n" + "\n".join(bad) + "\n" + describe(proc)
    assert all("(" in line for line in verdict_lines if line.startswith("SKIP")), "\n".join(verdict_lines)
    assert proc.returncode == 0, describe(proc)
    assert any(line.startswith("PASS") and "crash-points" in line for line in verdict_lines)
    assert_clean(sandbox)


@pytest.mark.parametrize("flag, code", [("--keyless", 1), ("", 0)])
def test_the_black_box_worker_is_judged_by_the_same_records(venv: Venv, sandbox: Sandbox, flag: str,
                                                            code: int) -> None:
    worker = f"python -m acme_billing.worker {{run_id}} {flag}".strip()
    proc = venv.killpoint(sandbox, "replay", "--scenario", "crash-points", "--schedule", "charge:effect.applied:kill",
                          "--steps", "acme_billing.steps", "--worker-cmd", worker)
    assert proc.returncode == code, describe(proc)
    if code:
        assert EXTRA_CHARGE.search(proc.stdout), describe(proc)
        line = REPLAY.search(proc.stdout)
        assert line and f"--worker-cmd '{worker}'" in line.group(1), describe(proc)
    else:
        assert "PASS     crash-points" in proc.stdout and "never reached" not in proc.stdout, describe(proc)
    assert_clean(sandbox)
