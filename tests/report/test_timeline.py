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
