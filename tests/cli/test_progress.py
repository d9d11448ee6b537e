"""Progress of a long run: a rich bar on a terminal (done/total, failures, elapsed, ETA), plain lines when
the output is not a terminal or CI is set."""

from __future__ import annotations

import io
import re
from types import SimpleNamespace

from rich.console import Console

from killpoint.cli.progress import TrialProgress, is_live


def console(terminal: bool) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=terminal, width=120, color_system=None), out


def test_a_terminal_gets_a_bar_unless_ci_is_set() -> None:
    term, _ = console(True)
    pipe, _ = console(False)
    assert is_live(term, {}) and not is_live(term, {"CI": "true"}) and not is_live(pipe, {})


def test_plain_lines_count_trials_and_failures_with_elapsed_and_eta() -> None:
    c, out = console(False)
    progress = TrialProgress(c, live=False)
    for i in range(1, 13):
        progress("crash-points", i, 12, "fail" if i in (3, 11) else "pass")
    lines = out.getvalue().splitlines()
    assert len(lines) == 2, lines  # every 10th trial and the last one
    assert re.fullmatch(r"crash-points: 10/12 trials, 1 failure so far, elapsed \d+s, eta \d+s \(last: pass\)", lines[0])
    assert lines[1].startswith("crash-points: 12/12 trials, 2 failures so far") and "eta 0s" in lines[1]


def test_a_live_bar_shows_done_total_and_failures() -> None:
    c, out = console(True)
    progress = TrialProgress(c, live=True)
    for i in range(1, 4):
        progress("zombie-worker", i, 3, "fail" if i == 2 else "pass")
    progress.close()
    text = out.getvalue()
    assert "zombie-worker" in text and "3/3" in text and "1 failed" in text and "eta" in text, text


def test_phases_of_a_scenario_count_on_and_end_at_its_true_total() -> None:
    """crash-points runs every single fault (a plan of 40), then random schedules (a plan of 8): one count."""
    c, out = console(False)
    progress = TrialProgress(c, live=False)
    for i in range(1, 41):
        progress("crash-points", i, 40, "pass")
    for i in range(1, 9):
        progress("crash-points", i, 8, "fail" if i == 8 else "pass")
    lines = out.getvalue().splitlines()
    assert lines[-1].startswith("crash-points: 48/48 trials, 1 failure so far"), lines
    assert not any(" 8/8 " in line for line in lines), lines
    live, text = console(True)
    bar = TrialProgress(live, live=True)
    for total in (3, 2):
        for i in range(1, total + 1):
            bar("crash-points", i, total, "pass")
    bar.close()
    assert "5/5" in text.getvalue(), text.getvalue()


def test_a_scenario_without_per_trial_progress_gets_its_line_when_it_ends() -> None:
    c, out = console(False)
    progress = TrialProgress(c, live=False)
    trials = [SimpleNamespace(outcome="pass"), SimpleNamespace(outcome="fail"), SimpleNamespace(outcome="pass")]
    progress.ended(SimpleNamespace(name="deploy-drain", trials=trials, elapsed=4.0))
    progress.ended(SimpleNamespace(name="skipped-one", trials=[], elapsed=0.0))  # nothing ran: no line
    progress("crash-points", 1, 1, "pass")
    progress.ended(SimpleNamespace(name="crash-points", trials=trials, elapsed=1.0))  # counted already
    lines = out.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert re.fullmatch(r"deploy-drain: 3/3 trials, 1 failure so far, elapsed 4s, eta 0s \(last: pass\)", lines[0])
    assert lines[1].startswith("crash-points: 1/1 trials")
