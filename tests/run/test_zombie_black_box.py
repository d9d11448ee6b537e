"""A black-box worker frozen inside its checkpoint transaction is thawed whatever its successor does, so a
`stop` trial always ends with a verdict (harness/run/nemesis.py `_await_successor`).

`tests/helpers/skiplocked_worker.py` claims its run's row with `FOR UPDATE SKIP LOCKED`: its successor never
waits on the zombie's row lock (no `pg_locks` wait), it polls (`--on-locked wait`) or leaves (`exit`).
Before the fix, a polling successor kept the zombie frozen until the run's time budget was spent, and the
trial failed `completes` as a hang.
"""

from __future__ import annotations

import json
import re
import shlex
import sys

import pytest

from tests.helpers import REPO
from tests.helpers.sandbox import Sandbox

WORKER = REPO / "tests" / "helpers" / "skiplocked_worker.py"


def thaws(box: Sandbox) -> list[str]:
    """The `why` of every thaw in the sandbox's run directories."""
    out = []
    for history in sorted(box.out.glob("*/history.jsonl")):
        for line in history.read_text().splitlines():
            event = json.loads(line)
            if event["type"] == "thaw":
                out.append(event["why"])
    return out


@pytest.mark.parametrize(("schedule", "on_locked", "why"), [
    ("email:checkpoint.writing:stop", "wait", "successor made no progress"),
    ("email:effect.received:stop", "wait", "successor made no progress"),  # frozen holding its row lock
    ("email:checkpoint.writing:stop", "exit", "successor ended"),
])
def test_a_zombie_frozen_in_its_transaction_is_thawed_when_its_successor_cannot_wait_for_it(
        sandbox: Sandbox, dsn_args: list[str], schedule: str, on_locked: str, why: str) -> None:
    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(WORKER))} {{run_id}} --on-locked {on_locked}"
    done = sandbox.run("replay", "--scenario", "zombie-worker", "--schedule", schedule, "--worker-cmd", cmd,
                       *dsn_args, "--out", str(sandbox.out), timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^PASS\s+zombie-worker\s", done.stdout, re.MULTILINE), done.stdout
    assert "time budget" not in done.stdout and "hung" not in done.stdout, done.stdout
    seen = thaws(sandbox)
    assert len(seen) == 1 and seen[0].startswith(why), seen
    assert not sandbox.survivors(), sandbox.survivors()
