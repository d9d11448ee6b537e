"""What a crash-free failure shows of the workers that exited non-zero without a traceback
(harness/run/evidence.py `exits`, harness/run/trial.py `exit_lines`): the last lines of each different log ending, once, read from the end
of the file however large it is; workers that were killed, exited 0, or left a traceback (shown apart) are
not repeated."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from killpoint.run.evidence import exits
from killpoint.run.trial import exit_lines


def inc(tmp_path: Path, name: str, text: str | None, exit_code: int | None = 1, signal: int | None = None):
    log = tmp_path / f"{name}.log"
    if text is not None:
        log.write_text(text)
    return SimpleNamespace(inc=name, log=str(log), exit_code=exit_code, signal=signal)


def test_each_different_ending_is_shown_once_with_the_workers_that_ended_so(tmp_path: Path) -> None:
    big = "".join(f"progress line {n}\n" for n in range(200_000)) + "x" * 5000 + "\nerror: no DATABASE_URL\n"
    incs = [inc(tmp_path, "r#1", big), inc(tmp_path, "r#2", big), inc(tmp_path, "r#3", "", exit_code=4),
            inc(tmp_path, "r#4", "killed\n", exit_code=None, signal=9), inc(tmp_path, "r#5", "fine\n", exit_code=0),
            inc(tmp_path, "r#6", "Traceback ...\n"), inc(tmp_path, "r#7", None)]
    lines = exit_lines(exits(incs, shown={"r#6": {}}))
    assert lines[0] == f"worker r#1 exited 1 (and 1 more worker(s) the same way); log {tmp_path / 'r#1.log'}:"
    assert lines[1:6] == ["    progress line 199997", "    progress line 199998", "    progress line 199999",
                          "    " + "x" * 300, "    error: no DATABASE_URL"]  # the last 5, a long one cut at 300
    assert f"worker r#3 exited 4; log {tmp_path / 'r#3.log'} (empty)" in lines
    assert not any(name in line for line in lines for name in ("r#4", "r#5", "r#6", "r#7"))
