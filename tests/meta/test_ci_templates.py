"""The CI templates a user copies (ci/), as a user would use them.

Read: YAML that parses, the keys each CI system requires, killpoint installed from its git repository or a
path (it is not on the package index), no reference to killpoint's own tests and no runner tags, the
shard's K/N from the matrix's own variables, one base seed for every shard of a pipeline, `checks: write`
for the JUnit action, command lines killpoint's own parser accepts, caches for pip, the initdb template
and the checkpoints, and a merge job; each template valid under its CI system's published schema (as
check-jsonschema vendors them), checked offline.

Run: each template copied into a scratch user repository (git, its own step module `parcel.steps`, a
pyproject depending on killpoint), edited as its comments say (the step module, killpoint from this
checkout's path, two shards), and its shell steps run in order in a venv: install, shard 1/2 and 2/2 with
one shared seed, merge, JUnit.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest
import yaml

from killpoint.cli.main import parser
from tests.helpers import REPO
from tests.helpers.checks import describe
from tests.helpers.gitrepo import MODULE, V1, git, project
from tests.helpers.sandbox import Sandbox
from tests.helpers.venvs import make_child_venv

CI = REPO / "ci"
TEMPLATES = ("github-actions.yml", "gitlab-ci.yml")


def load(name: str) -> dict:
    return yaml.safe_load((CI / name).read_text())


def killpoint_argv(line: str, variables: dict[str, str], command: str = "run") -> list[str]:
    """The `killpoint COMMAND ...` of a script line, its variables filled in, as argv after `killpoint`."""
    line = " ".join(line.split())
    for name, value in variables.items():
        line = line.replace(name, value)
    line = re.sub(r"\$\{(\w+):-(\w+)\}", r"\2", line)  # ${CI_NODE_INDEX:-1} -> 1
    return shlex.split(line[line.index(f"killpoint {command}") + len("killpoint "):])


def test_github_actions_template() -> None:
    wf = load("github-actions.yml")
    assert wf["name"] and (wf.get("on") or wf.get(True))  # YAML 1.1 reads the key `on` as True
    assert wf["permissions"]["checks"] == "write"  # mikepenz/action-junit-report publishes a check run
    env, jobs = wf["env"], wf["jobs"]
    assert env["KILLPOINT_STEPS"] and env["KILLPOINT_SOURCE"].startswith("git+") and "KILLPOINT_CACHE_DIR" in env
    assert env["KILLPOINT_SEED"] == "${{ github.run_id }}" and "SHARDS" not in env
    suite = jobs["crash-suite"]
    assert suite["runs-on"] and suite["strategy"]["fail-fast"] is False and suite["strategy"]["matrix"]["shard"]
    assert suite["env"] == {"SHARD_INDEX": "${{ strategy.job-index }}", "SHARD_TOTAL": "${{ strategy.job-total }}"}
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
    assert 'pip install -e . "$KILLPOINT_SOURCE"' in runs
    argv = killpoint_argv(next(r for r in runs if "killpoint run" in r),
                          {"$((SHARD_INDEX + 1))": "2", "$SHARD_TOTAL": "4", "$KILLPOINT_STEPS": "mypkg.agent_steps",
                           "$KILLPOINT_SEED": "12345", "$KILLPOINT_ARGS": ""})
    args = parser().parse_args(argv)
    assert args.steps == "mypkg.agent_steps" and str(args.shard) == "2/4" and args.seed == 12345
    assert args.out == "killpoint-runs/shard-2"
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["if"] == "always()" and upload["with"]["path"] == "killpoint-runs"
    report = jobs["report"]
    assert report["needs"] == "crash-suite" and report["if"] == "always()"
    lines = [s["run"] for s in report["steps"] if "run" in s]
    assert 'pip install "$KILLPOINT_SOURCE"' in lines
    merge = parser().parse_args(killpoint_argv(next(r for r in lines if "killpoint merge" in r), {}, "merge"))
    assert merge.dirs == ["killpoint-runs/shard-*"] and merge.junit == "killpoint-junit.xml"
    published = next(s for s in report["steps"] if s.get("uses", "").startswith("mikepenz/action-junit-report"))
    assert published["with"]["report_paths"] == "killpoint-junit.xml" and published["if"] == "always()"


def test_gitlab_template() -> None:
    ci = load("gitlab-ci.yml")
    job = ci["killpoint"]
    assert ci["stages"] == ["test", "report"] and job["stage"] == "test" and job["parallel"] >= 2
    variables = ci["variables"]
    assert variables["KILLPOINT_STEPS"] and variables["PIP_CACHE_DIR"] and variables["KILLPOINT_CACHE_DIR"]
    assert variables["KILLPOINT_SOURCE"].startswith("git+") and variables["KILLPOINT_SEED"] == "$CI_PIPELINE_ID"
    caches = {path: c["key"] for c in job["cache"] for path in c["paths"]}
    assert {".cache/pip", ".killpoint-cache", ".killpoint/checkpoints"} <= set(caches)
    assert "CI_NODE_INDEX" in caches[".killpoint/checkpoints"]  # each parallel job restores its own store
    script = job["script"]
    apt = next(r for r in script if "apt-get install" in r)
    assert apt.index("apt-get update") < apt.index("apt-get install")
    assert 'pip install -e . "$KILLPOINT_SOURCE"' in script
    argv = killpoint_argv(next(r for r in script if "killpoint run" in r),
                          {"$KILLPOINT_STEPS": "mypkg.agent_steps", "$KILLPOINT_SEED": "12345", "$KILLPOINT_ARGS": ""})
    args = parser().parse_args(argv)
    assert args.steps == "mypkg.agent_steps" and str(args.shard) == "1/1" and args.seed == 12345
    assert job["artifacts"]["when"] == "always" and job["artifacts"]["paths"] == ["killpoint-runs/"]
    report = ci["killpoint-report"]
    assert report["needs"] == ["killpoint"] and report["stage"] == "report" and report["when"] == "always"
    merge = parser().parse_args(killpoint_argv(next(r for r in report["script"] if "killpoint merge" in r), {},
                                               "merge"))
    assert merge.dirs == ["killpoint-runs/shard-*"] and report["artifacts"]["reports"]["junit"] == merge.junit
    for name, body in ci.items():
        if isinstance(body, dict) and "script" in body:
            assert isinstance(body["script"], list) and all(isinstance(x, str) for x in body["script"]), name


@pytest.mark.parametrize("name", TEMPLATES)
def test_a_template_holds_nothing_only_killpoints_own_repository_has(name: str) -> None:
    text = (CI / name).read_text()
    assert "tests/" not in text and "pytest" not in text, "killpoint's own tests are not in a user's repository"
    assert "pip install -e . killpoint" not in text and "not on PyPI" in text
    jobs = [body for body in yaml.safe_load(text).values() if isinstance(body, dict)]
    jobs += list(yaml.safe_load(text).get("jobs", {}).values())
    assert not [j for j in jobs if "tags" in j], "a runner tag most users lack"


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


# ---- the templates' steps, run in a scratch user repository ----------------------------------------------

SEED = "31337"
PYPROJECT = '''[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "parcel"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = ["killpoint"]

[tool.setuptools]
packages = ["parcel"]
'''
EXPRESSION = re.compile(r"\$\{\{\s*([\w.-]+)\s*\}\}")
SHARDS = 2


@pytest.fixture(scope="module")
def user_venv(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A venv with pip of its own (the templates call `pip`), seeing this interpreter's packages, and a copy
    of this checkout to install killpoint from (so that no build output lands in the checkout)."""
    base = tmp_path_factory.mktemp("ci-user")
    source = base / "killpoint-src"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(".git", ".killpoint", "__pycache__", "*.egg-info",
                                                                "build", "tests", ".hypothesis", ".venv*"))
    venv = base / "venv"
    make_child_venv(venv, pip=True)
    return venv, source


def user_repository(root: Path, template: str, target: str, edits: dict[str, str]) -> Path:
    """A scratch user repository: `parcel.steps` (tests/helpers/gitrepo.py), a pyproject depending on
    killpoint, and the template at `target` edited as its comments tell a user to."""
    project(root, V1)
    (root / "pyproject.toml").write_text(PYPROJECT)
    text = (CI / template).read_text()
    for old, new in edits.items():
        assert old in text, old
        text = text.replace(old, new)
    (root / target).parent.mkdir(parents=True, exist_ok=True)
    (root / target).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "killpoint in CI")
    return root


class Runner:
    """Shell steps run as a CI runner would: `bash -e` in the repository, with the job's variables, the
    venv's `pip` and `killpoint` first on PATH, and the sandbox's TMPDIR and Postgres root."""

    def __init__(self, repo: Path, venv: Path, sandbox: Sandbox) -> None:
        self.repo, self.venv, self.sandbox = repo, venv, sandbox
        self.done: list[tuple[str, subprocess.CompletedProcess[str]]] = []

    def env(self, variables: dict[str, str]) -> dict[str, str]:
        env = self.sandbox.env()
        env.pop("PYTHONPATH", None)  # killpoint comes from the venv's install, as in CI
        env.update(variables, VIRTUAL_ENV=str(self.venv), PATH=f"{self.venv / 'bin'}{os.pathsep}{env['PATH']}")
        return env

    def run(self, script: str, variables: dict[str, str]) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(["bash", "-e", "-c", script], cwd=self.repo, env=self.env(variables),
                              capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
        self.done.append((script, proc))
        return proc

    def must(self, script: str, variables: dict[str, str]) -> subprocess.CompletedProcess[str]:
        proc = self.run(script, variables)
        assert proc.returncode == 0, f"$ {script}\n{describe(proc)}"
        return proc


def github_expressions(text: str, values: dict[str, str]) -> str:
    """`${{ expr }}` filled in from `values` (an expression the test does not know fails it)."""
    return EXPRESSION.sub(lambda m: values[m[1]], text)


def shell_variables(values: dict[str, str], known: dict[str, str]) -> dict[str, str]:
    """GitLab's variables: `$NAME` and `${NAME}` in a value filled in from the variables before it."""
    out = dict(known)
    for name, value in values.items():
        out[name] = re.sub(r"\$\{?(\w+)\}?", lambda m: out.get(m[1], ""), str(value))
    return out


def run_github(repo: Path, runner: Runner) -> None:
    """The workflow's jobs, in order: every shard of `crash-suite` (its apt step passed over: the machine has
    Postgres; its install once, the jobs share this machine), then `report`'s shell steps."""
    wf = yaml.safe_load((repo / ".github/workflows/killpoint.yml").read_text())
    total = len(wf["jobs"]["crash-suite"]["strategy"]["matrix"]["shard"])
    assert total == SHARDS
    context = {"github.run_id": SEED, "github.workspace": str(repo), "github.sha": git(repo, "rev-parse", "HEAD"),
               "runner.os": "Linux", "strategy.job-total": str(total)}
    for index in range(total):
        values = {**context, "strategy.job-index": str(index), "matrix.shard": str(index + 1)}
        variables = {k: github_expressions(str(v), values)
                     for k, v in {**wf["env"], **wf["jobs"]["crash-suite"]["env"]}.items()}
        for step in wf["jobs"]["crash-suite"]["steps"]:
            if "run" not in step or "apt-get" in step["run"] or (index and "pip install" in step["run"]):
                continue
            runner.must(github_expressions(step["run"], values), variables)
    variables = {k: github_expressions(str(v), context) for k, v in wf["env"].items()}
    for step in wf["jobs"]["report"]["steps"]:
        if "run" in step:
            runner.must(github_expressions(step["run"], context), variables)


def run_gitlab(repo: Path, runner: Runner) -> None:
    """The pipeline's jobs, in order: every `parallel` job of `killpoint` (its apt line passed over: the
    machine has Postgres; its install once, the jobs share this machine), then `killpoint-report`."""
    ci = yaml.safe_load((repo / ".gitlab-ci.yml").read_text())
    total = ci["killpoint"]["parallel"]
    assert total == SHARDS
    for index in range(1, total + 1):
        variables = shell_variables(ci["variables"], {"CI_PIPELINE_ID": SEED, "CI_PROJECT_DIR": str(repo),
                                                      "CI_NODE_INDEX": str(index), "CI_NODE_TOTAL": str(total)})
        for line in ci["killpoint"]["script"]:
            if "apt-get" in line or (index > 1 and "pip install" in line):
                continue
            runner.must(line, variables)
    variables = shell_variables(ci["variables"], {"CI_PIPELINE_ID": SEED, "CI_PROJECT_DIR": str(repo)})
    for line in ci["killpoint-report"]["script"]:
        runner.must(line, variables)


CASES = {
    "github-actions.yml": (".github/workflows/killpoint.yml", {
        "KILLPOINT_STEPS: mypkg.agent_steps": f"KILLPOINT_STEPS: {MODULE}",
        "KILLPOINT_SOURCE: git+https://github.com/YOUR-ORG/killpoint.git@main": "KILLPOINT_SOURCE: {source}",
        "shard: [1, 2, 3, 4]": "shard: [1, 2]", 'KILLPOINT_ARGS: ""': 'KILLPOINT_ARGS: "--budget 1"'}, run_github),
    "gitlab-ci.yml": (".gitlab-ci.yml", {
        "KILLPOINT_STEPS: mypkg.agent_steps": f"KILLPOINT_STEPS: {MODULE}",
        "KILLPOINT_SOURCE: git+https://gitlab.com/YOUR-GROUP/killpoint.git@main": "KILLPOINT_SOURCE: {source}",
        "parallel: 4": "parallel: 2", 'KILLPOINT_ARGS: ""': 'KILLPOINT_ARGS: "--budget 1"'}, run_gitlab),
}


@pytest.mark.slow  # per template: an install from a path, two shards of the whole suite on a small agent, a merge
@pytest.mark.parametrize("template", TEMPLATES)
def test_the_templates_steps_run_in_a_users_repository(template: str, user_venv: tuple[Path, Path],
                                                       sandbox: Sandbox) -> None:
    venv, source = user_venv
    target, edits, run = CASES[template]
    repo = user_repository(sandbox.root / "user-repo", template, target,
                           {old: new.format(source=source) for old, new in edits.items()})
    pytest.importorskip("check_jsonschema")
    checked = validate(repo / target, SCHEMAS[template])  # the user's edited copy is still valid
    assert checked.returncode == 0, checked.stdout + checked.stderr
    runner = Runner(repo, venv, sandbox)
    run(repo, runner)

    where = runner.must("python -c 'import killpoint, parcel; print(killpoint.__file__); print(parcel.__file__)'", {})
    kp, parcel = where.stdout.split()
    assert Path(kp).is_relative_to(venv) and Path(parcel).is_relative_to(repo)  # as installed by the template
    shards = [next(p for p in (repo / "killpoint-runs" / f"shard-{k}").iterdir() if p.is_dir()) for k in (1, 2)]
    metas = [json.loads((d / "meta.json").read_text()) for d in shards]
    assert [m["seed"] for m in metas] == [int(SEED)] * 2 and {m["steps"] for m in metas} == {MODULE}
    trials = [[(sc["scenario"], t["schedule"], t["seed"]) for sc in json.loads((d / "verdicts.json").read_text())
               for t in sc["trials"]] for d in shards]
    assert trials[0] and trials[1]
    # Shares of one exploration: no trial in both. A trial is named here by scenario, schedule and seed,
    # which several trials of one scenario may share (its variants); deploy-drain's are one schedule under
    # several graces (not in verdicts.json), which the deal spreads over the shards: only its names may be
    # in both. The merge below counts every trial once.
    both = set(trials[0]) & set(trials[1])
    assert {name[0] for name in both} <= {"deploy-drain"}, both

    (merged,) = (repo / "killpoint-merged").iterdir()
    verdicts = json.loads((merged / "verdicts.json").read_text())
    assert Counter((sc["scenario"], t["schedule"], t["seed"]) for sc in verdicts for t in sc["trials"]) == (
        Counter(trials[0]) + Counter(trials[1]))
    assert not [sc for sc in verdicts if sc["outcome"] not in ("pass", "skipped", "expected")], verdicts
    assert (merged / "report.html").is_file()
    junit = ET.parse(repo / "killpoint-junit.xml").getroot()
    assert int(junit.get("tests")) >= len(trials[0]) + len(trials[1]) and junit.get("failures") == "0"
    assert sandbox.survivors() == [] and sandbox.leftover_dirs() == []
