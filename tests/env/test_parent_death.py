"""A child dies with its parent even when the parent died first: `die_with_parent(sig, parent)` ends a child
whose parent is gone before the request (no signal would ever come: the restarted postmaster that outlived
a SIGKILLed harness, tests/hostile/test_restarted_server.py, seen twice in whole-suite runs)."""

from __future__ import annotations

import os
import subprocess
import sys

from killpoint.env.postgres.process import popen_dying_with_us
from killpoint.env.procutil import dying_with_us

ASK = "import sys; from killpoint.env.procutil import die_with_parent; die_with_parent(9, int(sys.argv[1])); print('alive')"


def test_a_child_whose_parent_is_not_the_one_it_was_forked_by_ends_at_once() -> None:
    orphaned = subprocess.run([sys.executable, "-c", ASK, "1"], capture_output=True, text=True, timeout=60)
    assert (orphaned.returncode, orphaned.stdout) == (1, "")
    kept = subprocess.run([sys.executable, "-c", ASK, str(os.getpid())], capture_output=True, text=True, timeout=60)
    assert (kept.returncode, kept.stdout.strip()) == (0, "alive")


def test_children_started_to_die_with_us_run_while_we_live() -> None:
    """The `preexec_fn`s of the launchers (`dying_with_us`) and of Postgres (`popen_dying_with_us`) let a
    child whose parent lives become its program."""
    for start in (lambda argv: subprocess.Popen(argv, stdout=subprocess.PIPE, preexec_fn=dying_with_us()),  # noqa: PLW1509
                  lambda argv: popen_dying_with_us(argv, stdout=subprocess.PIPE)):
        proc = start([sys.executable, "-c", "print('ran')"])
        out, _ = proc.communicate(timeout=60)
        assert (proc.returncode, out.strip()) == (0, b"ran")
