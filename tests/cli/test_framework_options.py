"""The options for crash-testing a framework's worker refuse bad input in one line, exit 2, before anything
starts, and leave nothing behind: --adapter without --worker-cmd, an unknown --adapter, a bad --actions, a
--skip-checker that names no checker."""

from __future__ import annotations

import pytest

from tests.helpers.checks import describe

CASES = [
    (["--adapter", "langgraph"], "error[adapter-without-worker]"),
    (["--adapter", "temporal", "--worker-cmd", "true {run_id}"], "invalid choice: 'temporal'"),
    (["--actions", "kill,explode"], "error[bad-actions]"),
    (["--skip-checker", "exactly_twice"], "error[unknown-checker]"),
]


@pytest.mark.parametrize(("extra", "says"), CASES, ids=[c[1] for c in CASES])
def test_bad_framework_options_are_refused_in_one_line(sandbox, extra, says):
    proc = sandbox.run("replay", "--scenario", "crash-points", "--schedule", "email:effect.applied:kill",
                       "--out", str(sandbox.out), *extra)
    assert proc.returncode == 2, describe(proc)
    assert says in proc.stderr, describe(proc)
    assert "Traceback" not in proc.stderr, describe(proc)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len([line for line in lines if "error" in line]) == 1, describe(proc)
    assert not sandbox.out.exists() or not any(sandbox.out.iterdir()), list(sandbox.out.iterdir())
    assert not sandbox.survivors() and not sandbox.leftover_dirs()
