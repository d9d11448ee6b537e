"""`killpoint report RUN_DIR`: the HTML timeline of a run directory the CLI wrote."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers.sandbox import Sandbox


def test_report_of_a_replay_shows_the_fault_on_the_killed_incarnation(sandbox: Sandbox, tmp_path: Path) -> None:
    replay = sandbox.run("replay", "--scenario", "crash-points", "--schedule", "email:effect.applied:kill",
                           "--out", str(tmp_path), "--quiet")
    assert replay.returncode == 0, replay.stdout + replay.stderr
    run_dir = Path(re.search(r"run directory: (\S+)", replay.stdout).group(1))
    out = sandbox.run("report", str(run_dir))
    assert out.returncode == 0, out.stderr
    page = (run_dir / "report.html").read_text()
    assert out.stdout.strip() == str(run_dir / "report.html")
    assert "crash-points: pass" in page and "email:effect.applied:kill" in page
    svg = re.search(r"<svg class=timeline.*?</svg>", page[page.index("id='run-crash-points-"):], re.S).group(0)
    assert re.search(r">crash-points-\d+#1</text>", svg)  # the killed incarnation's lane, labelled
    assert "KILL email:effect.applied" in svg and "<title>fault email effect.applied kill @" in svg
    assert "killed (signal 9)</text>" in svg  # its end, by signal 9, labelled


def test_report_of_a_directory_without_history_is_one_line_and_exit_2(sandbox: Sandbox, tmp_path: Path) -> None:
    out = sandbox.run("report", str(tmp_path))
    assert out.returncode == 2
    assert out.stderr.strip().startswith("killpoint: error[not-a-run-dir]") and "Traceback" not in out.stderr


def test_an_outage_is_a_band_to_its_end_and_a_clock_jump_labels_the_resumed_incarnation() -> None:
    """Flow step 5 of report/timeline.py, on events written by hand (a run of two incarnations)."""
    from killpoint.events import decode
    from killpoint.report.timeline import clock_shifts, spans, timeline_svg

    rows = [
        {"type": "inc.start", "t": 0.0, "run_id": "r", "inc": "r#1", "role": "worker", "pid": 1},
        {"type": "point", "t": 0.5, "run_id": "r", "inc": "r#1", "step": "charge", "point": "effect.received",
         "nth": 1, "source": "ledger"},
        {"type": "fault", "t": 0.5, "run_id": "r", "inc": "r#1", "step": "charge", "point": "effect.received",
         "action": "outage", "nth": 1},
        {"type": "point", "t": 0.6, "run_id": "r", "inc": "r#1", "step": "charge", "point": "effect.received",
         "nth": 2, "source": "ledger"},
        {"type": "point", "t": 0.9, "run_id": "r", "inc": "r#1", "step": "email", "point": "checkpoint.writing",
         "nth": 1, "source": "worker"},
        {"type": "fault", "t": 0.9, "run_id": "r", "inc": "r#1", "step": "email", "point": "checkpoint.writing",
         "action": "clock+366d", "nth": 1},
        {"type": "inc.end", "t": 1.0, "run_id": "r", "inc": "r#1", "signal": 9},
        {"type": "inc.start", "t": 1.2, "run_id": "r", "inc": "r#2", "role": "worker", "pid": 2},
        {"type": "inc.end", "t": 2.0, "run_id": "r", "inc": "r#2", "exit_code": 0},
    ]
    evs = [e for i, row in enumerate(rows) if (e := decode({"i": i, **row})) is not None]
    assert spans(evs) == [(0.5, 1.2, "r#1", "outage: ledger")]  # until the next incarnation starts
    assert list(clock_shifts(evs).values()) == [366 * 86400]
    svg = timeline_svg(evs)
    assert "class='outage'" in svg and "<title>outage: ledger</title>" in svg
    assert "clock +366d</text>" in svg and "CLOCK+366D email:checkpoint.writing" in svg
