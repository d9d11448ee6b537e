"""A session loads the user's step module while its fork servers import it (harness/run/opening.py, flow
step 1): the probe that checks the module and the servers' imports run at once, so a step module whose
import costs a second (a model SDK) no longer costs it twice in a row before the first trial.

The step module here is the reference agent's steps with an import that, in the probe, waits for a fork
server's import of the same module to have begun (a file it touches): at once when the two overlap, after
30 s (and said so) when the servers start only once the probe is done."""

from __future__ import annotations

from pathlib import Path
from subprocess import CompletedProcess

from tests.helpers.checks import describe
from tests.helpers.sandbox import Sandbox

AGENT = '''
import inspect
import os
import time
from pathlib import Path
from subprocess import CompletedProcess

from killpoint.reference_agent.invoice_agent import MIGRATIONS, OWN_EFFECTS_SQL, START, STATE_VERSION, STEPS, initial_state

_marks = Path(os.environ["KP_TEST_MARKS"])
if any(frame.function == "probe_child" for frame in inspect.stack()):  # the probe that checks the module
    _deadline = time.monotonic() + 30
    while not any(_marks.glob("imported-*")) and time.monotonic() < _deadline:
        time.sleep(0.01)
    (_marks / ("probe-overlapped" if any(_marks.glob("imported-*")) else "probe-alone")).touch()
else:  # a fork server (or, after the probe, the harness)
    (_marks / f"imported-{os.getpid()}").touch()
'''


def replay(sandbox: Sandbox, schedule: str, marks: str) -> CompletedProcess[str]:
    """`killpoint replay` of crash-points' `schedule` on the step module above, its marks in folder `marks`."""
    folder = sandbox.root / marks
    folder.mkdir()
    (sandbox.cwd / "overlap_agent.py").write_text(AGENT)
    return sandbox.run("replay", "--scenario", "crash-points", "--schedule", schedule, "--steps", "overlap_agent",
                       "--out", str(sandbox.out), env={"KP_TEST_MARKS": str(folder)})


def test_the_probe_of_a_step_module_overlaps_its_fork_servers_import(sandbox: Sandbox) -> None:
    done = replay(sandbox, "email:effect.applied:kill", "marks")
    assert done.returncode == 0, describe(done)
    marks = sandbox.root / "marks"
    assert (marks / "probe-overlapped").exists(), sorted(p.name for p in marks.iterdir())
    assert not (marks / "probe-alone").exists()
    assert len(list(marks.glob("imported-*"))) >= 2  # both fork servers (one per hash seed) imported it
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
