"""Shared assertions on what the CLI printed."""

from __future__ import annotations

import re
import shlex
import subprocess

REPLAY = re.compile(r"^\s*replay:\s+(killpoint replay .*)$", re.MULTILINE)
"""The `replay:` line a failure report prints; its group is the command, as printed."""


def failing_checkers(stdout: str) -> list[str]:
    """The checkers a CLI report names as failing (`  <checker>: fail: ...` lines), in the order printed,
    once per line (so two reports can be compared, not only searched)."""
    return re.findall(r"^\s+(\w+): fail:", stdout, flags=re.MULTILINE)


def describe(proc: subprocess.CompletedProcess[str]) -> str:
    """A finished CLI subprocess for an assertion message: its exit code and the tails of its output."""
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}"


def cli_args(replay_line: str) -> list[str]:
    """The argv after `killpoint` of a printed replay line."""
    argv = shlex.split(replay_line)
    assert argv[0] == "killpoint"
    return argv[1:]
