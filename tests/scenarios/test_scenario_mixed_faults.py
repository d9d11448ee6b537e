"""mixed-faults through the CLI: a plain `killpoint run --scenario mixed-faults` finds the mutant whose email
is sent from a thread the step does not join (lost only when a 5xx and a kill come together), and passes the
reference agent. The plan itself is tested purely in tests/faults/test_mixed.py."""

from __future__ import annotations

import re

from tests.gallery.mutants import BY_NAME
from tests.helpers.sandbox import Sandbox

UNJOINED = BY_NAME["unjoined_thread"]


def test_a_plain_run_of_mixed_faults_finds_an_unjoined_effect_thread(sandbox: Sandbox, dsn_args: list[str]) -> None:
    done = sandbox.run("run", "--scenario", "mixed-faults", "--seed", "1", "--budget", "0", "--steps", UNJOINED.module,
                       *dsn_args, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "exactly_once: fail" in done.stdout
    # a 5xx on the email with a kill after it (which kill comes first among the failures depends on the order
    # the failure blocks are printed in; both lose the mail)
    assert re.search(r"schedule:\s+email:effect\.received:error,\S+:kill$", done.stdout, re.MULTILINE), done.stdout


def test_the_reference_agent_passes_mixed_faults(sandbox: Sandbox, dsn_args: list[str]) -> None:
    done = sandbox.run("run", "--scenario", "mixed-faults", "--seed", "1", "--budget", "20", *dsn_args, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^PASS\s+mixed-faults\s", done.stdout, re.MULTILINE), done.stdout
