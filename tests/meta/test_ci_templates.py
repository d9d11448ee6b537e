"""The CI templates a user copies (ci/): YAML that parses, the keys each CI system requires, a killpoint
command line that killpoint's own parser accepts (the user's step module, a shard of the schedules, JUnit),
caches for pip and the initdb template, run directories kept on failure with an expiry, the shards' JUnit
merged, and the docker provider's job kept; and each template valid under its CI system's published schema
(GitHub's workflow schema, GitLab's CI schema, as check-jsonschema vendors them), checked offline."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from killpoint.cli.main import parser

CI = Path(__file__).resolve().parents[2] / "ci"


def load(name: str) -> dict:
    return yaml.safe_load((CI / name).read_text())


def killpoint_argv(script: str, variables: dict[str, str]) -> list[str]:
    """The `killpoint run ...` line of a script, its variables filled in, as argv after `killpoint`."""
    line = next(x for x in script.splitlines() + [script] if "killpoint run" in x)
    line = " ".join(line.split())
    for name, value in variables.items():
        line = line.replace(name, value)
    line = re.sub(r"\$\{(\w+):-(\w+)\}", r"\2", line)  # ${CI_NODE_INDEX:-1} -> 1
    return shlex.split(line[line.index("killpoint run") + len("killpoint "):])


def test_github_actions_template() -> None:
    wf = load("github-actions.yml")
    assert wf["name"] and (wf.get("on") or wf.get(True))  # YAML 1.1 reads the key `on` as True
    jobs = wf["jobs"]
    suite = jobs["crash-suite"]
    assert suite["runs-on"] and suite["strategy"]["fail-fast"] is False
    shards = suite["strategy"]["matrix"]["shard"]
    assert shards == list(range(1, len(shards) + 1)) and int(wf["env"]["SHARDS"]) == len(shards)
    assert "KILLPOINT_CACHE_DIR" in wf["env"] and wf["env"]["KILLPOINT_STEPS"]
    steps = suite["steps"]
    assert all("uses" in s or "run" in s for s in steps)
    uses = {s["uses"].split("@")[0]: s for s in steps if "uses" in s}
    assert uses["actions/setup-python"]["with"]["cache"] == "pip"
    caches = {s["with"]["path"]: s["with"] for s in steps if s.get("uses", "").startswith("actions/cache@")}
    assert set(caches) == {".killpoint-cache", ".killpoint/checkpoints"}
    # the checkpoints a commit's run keeps are restored by the next commit's run of the same shard
    kept = caches[".killpoint/checkpoints"]
    assert "${{ github.sha }}" in kept["key"] and "${{ matrix.shard }}" in kept["key"]
    assert kept["key"].startswith(kept["restore-keys"]) and "github.sha" not in kept["restore-keys"]
    runs = [s["run"] for s in steps if "run" in s]
    apt = next(r for r in runs if "apt-get install" in r)
    assert apt.index("apt-get update") < apt.index("apt-get install")
    assert any("pip install" in r and "killpoint" in r for r in runs)
    argv = killpoint_argv(next(r for r in runs if "killpoint run" in r),
                          {"${{ matrix.shard }}": "2", "$SHARDS": "4", "$KILLPOINT_STEPS": "mypkg.agent_steps"})
    args = parser().parse_args(argv)
    assert args.steps == "mypkg.agent_steps" and str(args.shard) == "2/4" and args.junit == "killpoint-junit-2.xml"
    kept = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact") and s.get("if") == "failure()"]
    assert kept and kept[0]["with"]["path"] == ".killpoint/runs" and kept[0]["with"]["retention-days"] > 0
    assert any(s.get("uses", "").startswith("mikepenz/action-junit-report") for s in steps)
    merged = jobs["merged-report"]
    assert merged["needs"] == "crash-suite" and merged["if"] == "always()"
    assert any("junitparser merge" in s.get("run", "") for s in merged["steps"])
    assert "docker-provider" in jobs  # the docker provider's own tests stay


def test_gitlab_template() -> None:
    ci = load("gitlab-ci.yml")
    job = ci["killpoint"]
    assert ci["stages"] == ["test", "report"] and job["stage"] == "test" and job["parallel"] >= 2
    variables = ci["variables"]
    assert variables["KILLPOINT_STEPS"] and variables["PIP_CACHE_DIR"] and variables["KILLPOINT_CACHE_DIR"]
    caches = {path: c["key"] for c in job["cache"] for path in c["paths"]}
    assert {".cache/pip", ".killpoint-cache", ".killpoint/checkpoints"} <= set(caches)
    assert "CI_NODE_INDEX" in caches[".killpoint/checkpoints"]  # each parallel job restores its own store
    script = job["script"]
    apt = next(r for r in script if "apt-get install" in r)
    assert apt.index("apt-get update") < apt.index("apt-get install")
    assert any("pip install" in r and "killpoint" in r for r in script)
    argv = killpoint_argv(next(r for r in script if "killpoint run" in r), {"$KILLPOINT_STEPS": "mypkg.agent_steps"})
    args = parser().parse_args(argv)
    assert args.steps == "mypkg.agent_steps" and str(args.shard) == "1/1" and args.junit == "killpoint-junit-1.xml"
    art = job["artifacts"]
    assert art["expire_in"] and "killpoint-failed-runs" in art["paths"] and art["reports"]["junit"]
    assert any("CI_JOB_STATUS" in line and "killpoint-failed-runs" in line for line in job["after_script"])
    report = ci["killpoint-report"]
    assert report["needs"] == ["killpoint"] and report["stage"] == "report" and report["artifacts"]["expire_in"]
    assert any("junitparser merge" in line for line in report["script"])
    assert "killpoint-docker" in ci  # the docker provider's own tests stay
    for name, body in ci.items():
        if isinstance(body, dict) and "script" in body:
            assert isinstance(body["script"], list) and all(isinstance(x, str) for x in body["script"]), name


SCHEMAS = {"github-actions.yml": "vendor.github-workflows", "gitlab-ci.yml": "vendor.gitlab-ci"}
OFFLINE = {"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": ""}
"""A proxy nobody listens on: a schema fetched from the network would fail the check rather than pass it."""


def validate(path: Path, schema: str) -> subprocess.CompletedProcess:
    """check-jsonschema on `path` against its vendored `schema`, with the network out of reach."""
    return subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, str(path)],
                          capture_output=True, text=True, timeout=120, env={**os.environ, **OFFLINE})


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_the_template_is_valid_under_the_ci_systems_published_schema(name: str) -> None:
    pytest.importorskip("check_jsonschema", reason="check-jsonschema is not installed (pip install check-jsonschema)")
    out = validate(CI / name, SCHEMAS[name])
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize(("name", "line", "broken", "complaint"), [
    ("github-actions.yml", "    runs-on: ubuntu-latest", "    runs_on: ubuntu-latest", "'runs-on' is a required property"),
    ("gitlab-ci.yml", "    when: always", "    when: sometimes", "'sometimes' is not one of"),
])
def test_the_schema_check_catches_a_broken_template(name: str, line: str, broken: str, complaint: str,
                                                    tmp_path: Path) -> None:
    """The same check on a copy with one line broken fails, naming what is wrong."""
    pytest.importorskip("check_jsonschema", reason="check-jsonschema is not installed (pip install check-jsonschema)")
    text = (CI / name).read_text()
    assert line in text
    (tmp_path / name).write_text(text.replace(line, broken, 1))
    out = validate(tmp_path / name, SCHEMAS[name])
    assert out.returncode == 1 and complaint in out.stdout + out.stderr, out.stdout + out.stderr
