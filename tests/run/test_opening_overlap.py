"""A session checks a user's step module by its first fork server's import of it, while the other server
imports it too (harness/run/opening.py, flow step 1; `ForkLauncher.probe`): no probe child imports it a
third time, one after the other, before the first trial (a model SDK's import is ~1.2 s of CPU).

The step module here is the reference agent's steps with an import that leaves a mark per process that
imports it, and one more where that process is `stepmodule.probe`'s child."""

from __future__ import annotations

import os
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from tests.helpers.checks import describe
from tests.helpers.sandbox import Sandbox

AGENT = '''
import inspect
import os
from pathlib import Path

from killpoint.reference_agent.invoice_agent import MIGRATIONS, OWN_EFFECTS_SQL, START, STATE_VERSION, STEPS, initial_state

_marks = Path(os.environ["KP_TEST_MARKS"])
(_marks / f"imported-{os.getpid()}").touch()
if any(frame.function == "probe_child" for frame in inspect.stack()):  # a probe child of its own
    (_marks / "probe-child").touch()
'''


def replay(sandbox: Sandbox, schedule: str, marks: str, *extra: str) -> CompletedProcess[str]:
    """`killpoint replay` of crash-points' `schedule` on the step module above, its marks in folder `marks`."""
    folder = sandbox.root / marks
    folder.mkdir()
    (sandbox.cwd / "overlap_agent.py").write_text(AGENT)
    return sandbox.run("replay", "--scenario", "crash-points", "--schedule", schedule, "--steps", "overlap_agent",
                       "--out", str(sandbox.out), *extra, env={"KP_TEST_MARKS": str(folder)})


@pytest.mark.parametrize("spawn", ["fork", "exec"])
def test_a_step_module_is_checked_by_its_fork_servers_import(sandbox: Sandbox, spawn: str) -> None:
    """Forked: imported twice, once per fork server (one per hash seed), the first one's import its check.
    Exec'd (no fork server): checked in a probe child, then imported by each incarnation."""
    done = replay(sandbox, "email:effect.applied:kill", "marks", "--spawn", spawn)
    assert done.returncode == 0, describe(done)
    marks = sorted(p.name for p in (sandbox.root / "marks").iterdir())
    imports = [m for m in marks if m.startswith("imported-")]
    if spawn == "fork":
        assert "probe-child" not in marks and len(imports) == 2, marks
    else:
        assert "probe-child" in marks and len(imports) >= 3, marks  # the probe and the incarnations
    assert f"imported-{os.getpid()}" not in marks  # never the test's process (a forked CLI is a child of its own)
    assert sandbox.survivors() == []


def test_a_replay_schedule_is_checked_against_the_steps_the_session_loaded(sandbox: Sandbox) -> None:
    """`replay` checks its schedule's form before anything starts and its step names once the session has
    loaded the step module, before Postgres starts: a step the module lacks is one line (no line about
    Postgres before it), exit 2, nothing left behind."""
    done = replay(sandbox, "emial:effect.applied:kill", "marks")
    assert done.returncode == 2, describe(done)
    assert done.stderr.strip().splitlines() == [
        "killpoint: error[bad-schedule]: schedule token 'emial:effect.applied:kill': unknown step 'emial'. "
        "Fix: use one of: charge, email, plan, record, validate"], describe(done)
    assert sandbox.survivors() == [] and sandbox.leftover_dirs() == []
    assert not Path(sandbox.out).exists() or not any(Path(sandbox.out).iterdir())
    malformed = replay(sandbox, "email-effect", "untouched")
    assert malformed.returncode == 2 and "not of the form STEP:POINT:ACTION" in malformed.stderr, describe(malformed)
    assert list((sandbox.root / "untouched").iterdir()) == []  # refused before the module is imported anywhere


NOISY = '''
import sys

from killpoint.reference_agent.invoice_agent import MIGRATIONS, OWN_EFFECTS_SQL, START, STATE_VERSION, STEPS, initial_state

sys.stderr.write("x" * 300_000 + "\\n")  # more than a pipe holds: whoever reads the fork server's stderr must keep up
sys.stderr.flush()
'''


def test_a_step_module_that_writes_much_on_stderr_at_import_is_checked_and_runs(sandbox: Sandbox) -> None:
    """The fork server's stderr is read as it comes: a module writing 300 KB there while the server imports
    (and checks) it is not held on a full pipe until the import limit refuses it."""
    (sandbox.cwd / "noisy_agent.py").write_text(NOISY)
    done = sandbox.run("replay", "--scenario", "crash-points", "--schedule", "email:effect.applied:kill",
                       "--steps", "noisy_agent", "--out", str(sandbox.out), env={"KILLPOINT_IMPORT_TIMEOUT": "5"})
    assert done.returncode == 0, describe(done)[-3000:]
    assert "PASS     crash-points" in done.stdout, describe(done)[-3000:]
    assert sandbox.survivors() == []
