"""`killpoint judge RUN_DIR` re-runs every checker offline from the stored history and reproduces the
recorded verdicts, for a passing and a failing run; a history whose evidence was changed is judged anew,
so the difference shows (the judge reads the file, not a copy of the verdicts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

AGENT = '''
from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, initial_state, reference
from killpoint.reference_agent.invoice_agent import STEPS as _STEPS


def email(cp, ctx):
    """The reference email step without an idempotency key: a kill after the mailer applied it resends."""
    from killpoint.reference_agent import StepResult
    s = cp.state
    data = {"invoice_id": s["invoice_id"], "amount_cents": s["amount_cents"], "currency": s["currency"],
            "charge_id": s["charge_id"], "reference": reference(s)}
    receipt = ctx.mailer.send(s["customer"]["email"], "invoice", data, key=None)
    return StepResult("record", {"email_id": receipt.get("id")})


STEPS = {**_STEPS, "email": email}
'''


def killpoint(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run([sys.executable, "-m", "killpoint.cli.main", *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=300, stdin=subprocess.DEVNULL)


def replay(cwd: Path, steps: str, out: str) -> Path:
    done = killpoint(cwd, "replay", "--scenario", "crash-points", "--schedule", "email:effect.applied:kill",
                     "--steps", steps, "--out", out, "--quiet")
    assert done.returncode in (0, 1), done.stderr
    (run_dir,) = (cwd / out).iterdir()
    return run_dir


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    cwd = tmp_path_factory.mktemp("judge")
    (cwd / "judge_keyless_agent.py").write_text(AGENT)
    return {"pass": replay(cwd, "killpoint.reference_agent.invoice_agent", "out-pass"),
            "fail": replay(cwd, "judge_keyless_agent", "out-fail")}


@pytest.mark.parametrize("outcome", ["pass", "fail"])
def test_judge_reproduces_the_recorded_verdicts(runs: dict[str, Path], outcome: str) -> None:
    recorded = json.loads((runs[outcome] / "verdicts.json").read_text())
    done = killpoint(runs[outcome].parent.parent, "judge", str(runs[outcome]))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "every recorded verdict reproduced" in done.stdout
    trial_lines = [line for line in done.stdout.splitlines() if "email:effect.applied:kill" in line]
    assert trial_lines and all(line.startswith(outcome.upper()) for line in trial_lines), done.stdout
    assert outcome in json.dumps(recorded)


def test_judge_reads_the_evidence_from_the_file(runs: dict[str, Path], tmp_path: Path) -> None:
    """Drop the duplicate email from the failing run's stored evidence: judged again, exactly_once passes,
    and the judge says the verdict differs from the recorded one."""
    copy = tmp_path / "run"
    copy.mkdir()
    lines = (runs["fail"] / "history.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    mail = [e for e in events if e["type"] == "effect" and e["record"].get("service") == "mailer"
            and not e["run_id"].startswith("baseline")]
    assert len(mail) == 2, "the keyless agent's kill sends the email twice"
    kept = [line for line, e in zip(lines, events, strict=True) if e is not mail[-1]]
    (copy / "history.jsonl").write_text("\n".join(kept) + "\n" + '{"torn": ')  # and a torn last line
    done = killpoint(tmp_path, "judge", str(copy))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "DIFFERS" in done.stdout and "exactly_once: recorded fail" in done.stdout
    assert "1 unreadable line(s)" in done.stdout


def test_judge_of_a_directory_without_history_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = killpoint(tmp_path, "judge", str(tmp_path))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().count("\n") == 0 and "no-history" in done.stderr
