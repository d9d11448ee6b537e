"""schema-upgrade with the previous code taken from git, through the CLI, on a user's project that is a real
git checkout (tests/helpers/gitrepo.py): `--previous-steps git:HEAD~1` with a STATE_VERSION bump and a
migration passes; a field renamed without a bump is found by the default (the last commit that changed the
module) and said as such, exit 1; a bad ref is one line, exit 2; and no temp dir is left behind."""

from __future__ import annotations

import re

import pytest

from tests.helpers.gitrepo import FILE, MODULE, RENAMED, V1, V2, project
from tests.helpers.sandbox import Sandbox

SCENARIO = ("run", "--steps", MODULE, "--scenario", "schema-upgrade", "--no-store", "--seed", "1")


def scenario_line(stdout: str) -> str:
    found = re.search(r"^\S+\s+schema-upgrade\s.*$", stdout, re.MULTILINE)
    assert found, stdout
    return found.group(0)


@pytest.mark.parametrize("spawn", ["fork", "exec"])
def test_a_ref_with_a_version_bump_and_a_migration_passes(sandbox: Sandbox, spawn: str) -> None:
    """Forked or fresh, the first incarnation runs version 1 (its checkpoint is at version 1), not the
    current code that the harness and the fork servers imported."""
    commits = project(sandbox.cwd, V1, V2)
    proc = sandbox.run(*SCENARIO, "--previous-steps", "git:HEAD~1", "--spawn", spawn, "--out", str(sandbox.out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = scenario_line(proc.stdout)
    assert line.startswith("PASS") and f"v1 -> v2 (previous code: git:{commits[1][:12]} (git:HEAD~1))" in line, line
    assert sandbox.survivors() == [] and sandbox.leftover_dirs() == []  # the old code's temp dir is gone


def test_the_default_finds_a_field_renamed_without_a_version_bump(sandbox: Sandbox) -> None:
    commits = project(sandbox.cwd, V1, RENAMED)
    proc = sandbox.run(*SCENARIO, "--out", str(sandbox.out))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = scenario_line(proc.stdout)
    assert line.startswith("FAIL") and "v1 -> v1" in line, line
    assert (f"previous code git:{commits[1][:12]} (the last commit that changed {FILE} before its version at "
            f"{commits[2][:12]})") in proc.stderr, proc.stderr
    assert ("resumes_old_checkpoints: fail: state shape changed without a STATE_VERSION bump: KeyError: 'to'"
            in proc.stdout), proc.stdout
    assert f"--previous-steps git:{commits[1][:12]}" in proc.stdout  # the replay line runs the same old code
    assert sandbox.survivors() == [] and sandbox.leftover_dirs() == []


def test_a_bad_ref_is_one_line_and_exit_2(sandbox: Sandbox) -> None:
    project(sandbox.cwd, V1, V2)
    for ref, words in (("no-such-branch", "no commit 'no-such-branch'"),
                       ("HEAD~2", f"{FILE} does not exist at HEAD~2")):
        proc = sandbox.run(*SCENARIO, "--previous-steps", f"git:{ref}", "--out", str(sandbox.out))
        assert proc.returncode == 2, proc.stdout + proc.stderr
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and words in lines[0] and "Fix:" in lines[0], proc.stderr
        assert "Traceback" not in proc.stdout + proc.stderr
    assert not sandbox.out.exists() and sandbox.leftover_dirs() == []


def test_without_git_the_default_skips_with_the_reason(sandbox: Sandbox) -> None:
    (sandbox.cwd / "parcel").mkdir()
    (sandbox.cwd / "parcel" / "__init__.py").write_text("")
    (sandbox.cwd / FILE).write_text(V2)
    proc = sandbox.run(*SCENARIO, "--out", str(sandbox.out))
    # the only scenario asked for skipped: nothing was tested, which is never exit 0 (error[nothing-tested])
    assert proc.returncode == 2 and "error[nothing-tested]" in proc.stderr, proc.stdout + proc.stderr
    line = scenario_line(proc.stdout)
    assert line.startswith("SKIP") and "not in a git checkout" in line, line
    proc = sandbox.run(*SCENARIO, "--previous-steps", "git:HEAD~1", "--out", str(sandbox.out))
    assert proc.returncode == 2 and "not in a git checkout" in proc.stderr, proc.stderr
