"""A cassette that cannot be used (``KILLPOINT_MODEL_CASSETTE`` naming a missing file, a directory, a line that
is not JSON, or JSON that is not a cassette line) stops ``killpoint run`` before any run: one line naming the
file and its problem and the fix, exit 2, no traceback, and nothing left behind (no run directory, no
process, no temp dir or cluster)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.checks import describe
from tests.helpers.sandbox import Sandbox

CASES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "missing": (lambda root: root / "nowhere.jsonl", "no cassette at "),
    "directory": (lambda root: root, "cannot be read (IsADirectoryError"),
    "not-json": (lambda root: write(root, '{"api": "messages", "digest": '), ":1: not JSON"),
    "a-list": (lambda root: write(root, "[1, 2]"), ":1: not a cassette line (TypeError: a JSON list, not an object)"),
    "no-digest": (lambda root: write(root, '{"api": "messages", "text": "hi"}\n{"api": "messages"}'),
                  ":1: not a cassette line (KeyError: 'digest')"),
    "bad-usage": (lambda root: write(root, '{"api": "messages", "digest": "ab", "usage": "many"}'),
                  ":1: not a cassette line (AttributeError"),
}


def write(root: Path, text: str) -> Path:
    path = root / "answers.jsonl"
    path.write_text(text + "\n")
    return path


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_cassette_is_one_line_exit_2_and_nothing_is_left(case: str, sandbox: Sandbox, tmp_path: Path) -> None:
    make, problem = CASES[case]
    path = make(tmp_path)
    proc = sandbox.run("run", "--steps", "tests.tools.refund_agent", "--scenario", "crash-points",
                       "--out", str(sandbox.out), env={"KILLPOINT_MODEL_CASSETTE": str(path)})
    assert proc.returncode == 2, describe(proc)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("killpoint: error")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, describe(proc)
    assert errors[0].startswith("killpoint: error[bad-cassette]: the model cassette cannot be used: "), errors
    assert problem in errors[0] and str(path) in errors[0], errors
    assert "Fix: fix the file KILLPOINT_MODEL_CASSETTE names" in errors[0], errors
    assert not sandbox.out.exists() or not any(sandbox.out.iterdir()), list(sandbox.out.iterdir())
    assert sandbox.survivors() == [] and sandbox.leftover_dirs() == [], (sandbox.survivors(), sandbox.leftover_dirs())
