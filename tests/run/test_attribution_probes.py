"""Step attribution from what the harness saw, the key only as a hint; a service fault that ends a worker is a
fault on its step. Two correct agents that used to get false `bounded_rework` failures pass, through the CLI:

- `tests/gallery/variants/opaque_keys.py` keys its effects by a stable UUID (no `<run_id>:<step>` prefix): a
  zombie thawed inside `charge` sends its charge after its successor reported later steps; the request is the
  zombie's own step's (its incarnation's last `step.start`, harness/run/attribution.py), not the run's last.
- `tests/gallery/variants/gives_up_on_5xx.py` does not retry the ledger: a 5xx ends the worker, and the next
  incarnation re-does `charge` under the same key; that 5xx counts as the fault on `charge`
  (harness/checkers/process.py `bounded_rework`).
"""

from __future__ import annotations

import re

import pytest

from tests.helpers.sandbox import Sandbox


@pytest.mark.parametrize(("scenario", "schedule", "steps"), [
    ("zombie-worker", "charge:step.start:stop", "tests.gallery.variants.opaque_keys"),
    ("flaky-services", "charge:effect.received:error", "tests.gallery.variants.gives_up_on_5xx"),
])
def test_a_correct_agent_passes_whatever_its_keys_and_however_a_fault_ends_its_worker(
        sandbox: Sandbox, dsn_args: list[str], scenario: str, schedule: str, steps: str) -> None:
    done = sandbox.run("replay", "--scenario", scenario, "--schedule", schedule, "--steps", steps, *dsn_args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(rf"^PASS\s+{scenario}\s", done.stdout, re.MULTILINE), done.stdout
