"""stored-checkpoints through the CLI, on a user's small agent (tests/helpers/gitrepo.py's `parcel.steps`) in a
plain folder (no git, no old code kept): a `killpoint run` keeps the code's mid-run checkpoints under
.killpoint/checkpoints, the step module is rewritten, and the next `killpoint run` in the same folder resumes
them under the new code. A field renamed without a STATE_VERSION bump is found and said as such (exit 1, and
its replay line reproduces it); the same rename with a bump and a migration passes; `--no-store` keeps
nothing; no process and no temp dir is left behind."""

from __future__ import annotations

import json
import re
import shlex
import shutil

from tests.helpers.checks import describe
from tests.helpers.gitrepo import FILE, MODULE, RENAMED, V1, V2
from tests.helpers.sandbox import Sandbox

SCENARIO = ("run", "--steps", MODULE, "--scenario", "stored-checkpoints", "--seed", "1")
SENTENCE = "resumes_old_checkpoints: fail: state shape changed without a STATE_VERSION bump: KeyError: 'to'"


def write(box: Sandbox, source: str) -> None:
    """The step module as the user's editor leaves it (no stale bytecode of the version before)."""
    (box.cwd / "parcel").mkdir(exist_ok=True)
    (box.cwd / "parcel" / "__init__.py").write_text("")
    shutil.rmtree(box.cwd / "parcel" / "__pycache__", ignore_errors=True)
    (box.cwd / FILE).write_text(source)


def scenario_line(stdout: str) -> str:
    found = re.search(r"^\S+\s+stored-checkpoints\s.*$", stdout, re.MULTILINE)
    assert found, stdout
    return found.group(0)


def kept(box: Sandbox) -> list[dict]:
    folder = box.cwd / ".killpoint" / "checkpoints"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []


def clean(box: Sandbox) -> None:
    assert box.survivors() == [] and box.leftover_dirs() == []


def test_a_field_renamed_without_a_version_bump_is_found_and_replayed(sandbox: Sandbox) -> None:
    write(sandbox, V1)
    first = sandbox.run(*SCENARIO, "--out", str(sandbox.out))
    # nothing kept yet: the scenario skips, nothing was tested (exit 2), and this run's checkpoints are kept
    assert first.returncode == 2 and "error[nothing-tested]" in first.stderr, describe(first)
    assert scenario_line(first.stdout).startswith("SKIP") and "no checkpoint of parcel.steps kept" in first.stdout
    v1 = kept(sandbox)
    assert [c["cursor"] for c in v1] == ["pack", "notify", "book"], v1  # one per cursor of the run
    assert {c["state_version"] for c in v1} == {1} and len({c["digest"] for c in v1}) == 1
    assert v1[0]["row"]["data"]["state"] == {"recipient": "sam@example.com", "packed": False, "mail_id": None}
    assert all(c["row"]["data"]["cursor"] == c["cursor"] for c in v1)
    clean(sandbox)

    write(sandbox, RENAMED)
    second = sandbox.run(*SCENARIO, "--out", str(sandbox.out))
    assert second.returncode == 1, describe(second)
    assert scenario_line(second.stdout).startswith("FAIL"), describe(second)
    assert SENTENCE in second.stdout, describe(second)
    found = re.search(r"^\s*(killpoint replay --scenario stored-checkpoints --seed \d+ --steps parcel.steps)\s*$",
                      second.stdout, re.MULTILINE)
    assert found, describe(second)
    assert len({c["digest"] for c in kept(sandbox)}) == 2  # the renamed code's own are kept too
    clean(sandbox)

    replay = sandbox.run(*shlex.split(found.group(1))[1:], "--out", str(sandbox.out))
    assert replay.returncode == 1, describe(replay)
    assert SENTENCE in replay.stdout, describe(replay)
    clean(sandbox)


def test_a_bump_with_a_migration_passes_and_no_store_keeps_nothing(sandbox: Sandbox) -> None:
    write(sandbox, V1)
    off = sandbox.run(*SCENARIO, "--no-store", "--out", str(sandbox.out))
    assert off.returncode == 2 and "error[nothing-tested]" in off.stderr, describe(off)  # skipped: nothing tested
    assert scenario_line(off.stdout).startswith("SKIP") and "--no-store" in scenario_line(off.stdout)
    assert not (sandbox.cwd / ".killpoint" / "checkpoints").exists()
    clean(sandbox)

    first = sandbox.run(*SCENARIO, "--out", str(sandbox.out))
    assert first.returncode == 2 and len(kept(sandbox)) == 3, describe(first)  # skipped, but its checkpoints kept
    write(sandbox, V2)
    second = sandbox.run(*SCENARIO, "--out", str(sandbox.out))
    assert second.returncode == 0, describe(second)
    line = scenario_line(second.stdout)
    assert line.startswith("PASS") and "resumed 3 checkpoints kept from 1 earlier digest (v1) under v2" in line, line
    assert [c["state_version"] for c in kept(sandbox)] == [1, 1, 1, 2, 2, 2]
    clean(sandbox)
