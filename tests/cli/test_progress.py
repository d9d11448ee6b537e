"""Progress of a long run: a rich bar on a terminal (done/total, failures, elapsed, ETA), plain lines when
the output is not a terminal or CI is set."""

from __future__ import annotations

import io
import re

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
