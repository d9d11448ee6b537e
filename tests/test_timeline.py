"""`killpoint report RUN_DIR`: the HTML timeline of a run directory the CLI wrote."""

from __future__ import annotations

import re
from pathlib import Path


def test_report_of_a_replay_shows_the_fault_on_the_killed_incarnation(killpoint_cli, tmp_path: Path) -> None:
    replay = killpoint_cli("replay", "--scenario", "crash-points", "--schedule", "email:effect.applied:kill",
                           "--out", str(tmp_path), "--quiet")
    assert replay.returncode == 0, replay.stdout + replay.stderr
    run_dir = Path(re.search(r"run directory: (\S+)", replay.stdout).group(1))
    out = killpoint_cli("report", str(run_dir))
    assert out.returncode == 0, out.stderr
    page = (run_dir / "report.html").read_text()
    assert out.stdout.strip() == str(run_dir / "report.html")
    assert "crash-points: pass" in page and "email:effect.applied:kill" in page
    killed = re.search(r"<div class=lbl>(crash-points-\d+#1)</div><div class=lane>(.*?)</div>", page)
    assert killed and "fault email effect.applied kill" in killed.group(2)
    assert "inc.end 9 @" in killed.group(2)  # its end, by signal 9


def test_report_of_a_directory_without_history_is_one_line_and_exit_2(killpoint_cli, tmp_path: Path) -> None:
    out = killpoint_cli("report", str(tmp_path))
    assert out.returncode == 2
    assert out.stderr.strip().startswith("killpoint: error[not-a-run-dir]") and "Traceback" not in out.stderr
