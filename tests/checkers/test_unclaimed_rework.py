"""bounded_rework on black-box workers (`--worker-cmd`) that re-send keyed requests the services deduplicate,
more often than the run's faults explain, where the requests name no step (tests/gallery/blackbox/).

Such a worker's request names its step, if at all, by a `Killpoint-Step` header or its key; a generic re-send
(a relay replaying its outbox, a resume re-sending earlier steps' effects) names neither, and the harness
puts it in the step of the run's committed cursor (harness/run/attribution.py, rule 5). Before the fix
(`_to_first_request` in harness/checkers/process.py) every such repeat of one incarnation was counted as one
operation of the cursor's step, charged to whatever fault hit that step: both bugs PASSed (a relay re-sending
the email and the charge after a kill at the record step's checkpoint: one operation, one fault), and the
correct outbox relay FAILed ("record: 1 repeated after 0 fault(s)": its one repeat of the charge, after a kill
at the charge, counted on the step the cursor had reached). A repeat now belongs to the visit whose request
the service first applied under the same key.

Gallery: two bugs, `outbox_never_marked` (a relay that never marks its rows sent) and `resend_on_resume`
(re-sends every earlier step's effect on resume), must FAIL bounded_rework through the CLI, and the printed
replay line reproduces it; `outbox_marks_sent` (marks each row once the service answered: one repeat per
fault) must PASS the same schedules and the whole suite.
"""

from __future__ import annotations

import re
import shlex
import sys

import pytest

from killpoint.checkers.evidence import Evidence
from killpoint.checkers.process import bounded_rework
from killpoint.events import FaultFired, Point
from tests.helpers import REPO
from tests.helpers.sandbox import Sandbox

GALLERY = REPO / "tests" / "gallery" / "blackbox"
BUGS = ("outbox_never_marked", "resend_on_resume")
CORRECT = "outbox_marks_sent"
SCHEDULES = ("charge:effect.applied:kill", "record:checkpoint.writing:kill")
"""Faults a black-box worker reaches (service points, the SQL barrier's checkpoint points) after the email
was applied and checkpointed: a restart must not send the email again."""


def worker_cmd(name: str) -> str:
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(GALLERY / f'{name}.py'))} {{run_id}}"


def _replay(sandbox: Sandbox, dsn_args: list[str], name: str, schedule: str):
    return sandbox.run("replay", "--scenario", "crash-points", "--schedule", schedule, "--worker-cmd",
                       worker_cmd(name), *dsn_args, "--out", str(sandbox.out), timeout=240)


def _verdicts(box: Sandbox) -> list[dict]:
    """Every trial's verdict event in the sandbox's run directories (the crash-free runs have none)."""
    return [e for e in box.events() if e.get("type") == "verdict"]


def _checker(verdict: dict, name: str) -> dict:
    return next(v for v in verdict["verdicts"] if v["checker"] == name)


# ---- the checker alone, on the evidence of the CLI runs below ------------------------------------------

def _evidence(*resent: str) -> Evidence:
    """A black-box outbox relay (checkpoint points from the SQL barrier, no step.start) killed at the
    charge's `effect.applied`: the email (keyed k1) and the charge (k2) were sent with their step headers; the
    second incarnation's relay re-sends `resent` with no header, so the services put them in the cursor's
    step, `record`, and deduplicate them."""
    def committed(inc: str, step: str, seq: int) -> Point:
        return Point(run_id="r", inc=inc, step=step, point="checkpoint.committed", seq=seq, source="sql-barrier")

    def received(inc: str, step: str, service: str) -> Point:
        return Point(run_id="r", inc=inc, step=step, point="effect.received", source=service)

    events = [committed("r#1", "plan", 1), committed("r#1", "email", 2), received("r#1", "email", "mailer"),
              committed("r#1", "charge", 3), received("r#1", "charge", "ledger"),
              FaultFired(run_id="r", inc="r#1", step="charge", point="effect.applied", action="kill"),
              *(received("r#2", "record", {"k1": "mailer", "k2": "ledger"}[k]) for k in resent),
              committed("r#2", "record", 4)]
    attempts = [{"service": "mailer", "key": "k1", "outcome": "applied"},
                {"service": "ledger", "key": "k2", "outcome": "applied"},
                *({"service": {"k1": "mailer", "k2": "ledger"}[k], "key": k, "outcome": "deduplicated"}
                  for k in resent)]
    return Evidence("r", events=events, attempts=attempts)


def test_a_black_box_repeat_is_charged_to_the_step_whose_effect_it_repeats() -> None:
    correct = bounded_rework(_evidence("k2"), None)  # the charge's row, killed before it was marked sent
    assert correct.outcome == "pass", correct  # was FAIL: "record: 1 repeated after 0 fault(s)"
    bug = bounded_rework(_evidence("k1", "k2"), None)  # every row, the email's too
    assert bug.outcome == "fail", bug
    assert "email: 1 repeated after 0 fault(s)" in bug.reason and "charge" not in bug.reason, bug
    assert "repeated: mailer key=k1 (step email)" in bug.evidence, bug.evidence


def test_a_request_no_step_claims_stays_bounded_run_wide() -> None:
    """A deduplicated request the services saw with no step is not moved to the visit that applied its key:
    it is bounded by the run's faults, as before (tests/checkers/test_visits.py)."""
    ev = _evidence("k1")
    ev.events[6] = Point(run_id="r", inc="r#2", step=None, point="effect.received", source="mailer")
    verdict = bounded_rework(ev, None)
    assert verdict.outcome == "pass", verdict  # one repeat, one fault


# ---- the gallery, through the CLI ------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("name", BUGS)
def test_a_black_box_worker_that_re_sends_earlier_effects_fails_bounded_rework(
        sandbox: Sandbox, dsn_args: list[str], name: str, schedule: str) -> None:
    done = _replay(sandbox, dsn_args, name, schedule)
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.search(r"^FAIL\s+crash-points\s", done.stdout, re.MULTILINE), done.stdout
    assert "email: 1 repeated after 0 fault(s)" in done.stdout, done.stdout
    (verdict,) = _verdicts(sandbox)
    assert verdict["failing"] == ["bounded_rework"], verdict
    assert "repeated: mailer key=<run>.outbox.1 (step email)" in _checker(verdict, "bounded_rework")["evidence"]
    lines = done.stdout.splitlines()
    replay = lines[lines.index("reproduce the first failure with:") + 1].strip()
    argv = shlex.split(replay)
    assert argv[:2] == ["killpoint", "replay"] and worker_cmd(name) in argv, replay
    again = sandbox.run(*argv[1:], *dsn_args, "--out", str(sandbox.out / "again"), timeout=240)
    assert again.returncode == 1, again.stdout + again.stderr
    assert "bounded_rework: fail" in again.stdout and "email: 1 repeated after 0 fault(s)" in again.stdout, \
        again.stdout


@pytest.mark.slow
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_an_outbox_relay_that_marks_its_rows_sent_passes_bounded_rework(
        sandbox: Sandbox, dsn_args: list[str], schedule: str) -> None:
    done = _replay(sandbox, dsn_args, CORRECT, schedule)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^PASS\s+crash-points\s", done.stdout, re.MULTILINE), done.stdout
    (verdict,) = _verdicts(sandbox)
    rework = _checker(verdict, "bounded_rework")
    assert rework["outcome"] == "pass", rework  # judged, not n/a or unknown
    attempts = [e["record"] for e in sandbox.events() if e.get("type") == "attempt" and e.get("run_id") == verdict["run_id"]]
    repeats = [a["key"] for a in attempts if a.get("outcome") == "deduplicated"]
    if schedule.startswith("charge:effect.applied"):  # killed between the charge's send and its mark
        assert repeats == [f"{verdict['run_id']}.outbox.2"], attempts
    else:
        assert repeats == [], attempts


@pytest.mark.slow
def test_an_outbox_relay_that_marks_its_rows_sent_passes_the_whole_suite(sandbox: Sandbox, dsn_args: list[str]) -> None:
    """Every scenario that applies to a black-box worker, zombies included (its checkpoint write is a
    compare-and-set: a thawed zombie writes nothing and exits 3); bounded_rework judged in every trial."""
    done = sandbox.run("run", "--seed", "3", "--budget", "2", "--worker-cmd", worker_cmd(CORRECT), *dsn_args,
                       "--out", str(sandbox.out), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    for scenario in ("crash-points", "deploy-drain", "flaky-services", "mixed-faults", "zombie-worker"):
        assert re.search(rf"^PASS\s+{scenario}\s", done.stdout, re.MULTILINE), done.stdout
    verdicts = _verdicts(sandbox)
    judged = [_checker(v, "bounded_rework")["outcome"] for v in verdicts]
    assert len(verdicts) >= 50 and set(judged) == {"pass"}, judged
