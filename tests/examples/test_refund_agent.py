"""The example project `examples/refund_agent` (package `acme-refunds`), as a user would use it.

A fresh venv that sees this interpreter's packages (tests/helpers/venvs.py: killpoint, psycopg, anthropic
and pytest come from this interpreter, killpoint as the editable install of this checkout, whether this
interpreter is a system Python or a venv) gets the example installed from a copy
of its folder (a regular, non-editable install: the checkout is not written to), and then, from a temp
dir, with nothing on PYTHONPATH, so `acme_refunds` can only come from the venv:

- `killpoint run --steps acme_refunds.steps` passes the whole suite (every scenario PASS, or SKIP with a
  reason);
- `killpoint run --steps acme_refunds.keyless --scenario crash-points` fails exactly_once and prints a
  replay line, which fails the same way when run;
- `killpoint run --steps acme_refunds.crashy --scenario crash-points` says first that the agent fails
  with no faults, shows the KeyError, and runs no faulted trial;
- the example's own pytest file passes under the venv's pytest, through killpoint's plugin.

Each run happens in a sandbox (tests/helpers/sandbox.py) whose census must be empty afterwards: no
process, no temp dir, no Postgres cluster left behind.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import REPO
from tests.helpers.checks import describe, failing_checkers
from tests.helpers.sandbox import Sandbox
from tests.helpers.venvs import make_child_venv

EXAMPLE = REPO / "examples" / "refund_agent"
SCENARIO_LINE = re.compile(r"^(PASS|FAIL|UNKNOWN|EXPECTED|SKIP|ERROR)\s+(\S+)\s+\d+ schedules", re.MULTILINE)


class Venv:
    """A venv with the example installed, and the CLI / pytest of that venv run as subprocesses."""

    def __init__(self, root: Path, project: Path) -> None:
        self.root = root
        self.project = project  # the installed copy of the example (its tests/ are run from here)
        self.python = root / "bin" / "python"

    def env(self, sandbox: Sandbox) -> dict[str, str]:
        """The sandbox's environment, less PYTHONPATH (the venv alone must find the example)."""
        env = sandbox.env()
        env.pop("PYTHONPATH", None)
        env.pop("PYTHONHOME", None)
        env["VIRTUAL_ENV"] = str(self.root)
        env["PATH"] = f"{self.root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        return env

    def run(self, sandbox: Sandbox, argv: list[str], cwd: Path | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, capture_output=True, text=True, cwd=cwd or sandbox.cwd, env=self.env(sandbox),
                              timeout=timeout, stdin=subprocess.DEVNULL)

    def killpoint(self, sandbox: Sandbox, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """`killpoint ARGS --out <sandbox>/runs` with the venv's interpreter, from the sandbox's cwd."""
        return self.run(sandbox, [str(self.python), "-m", "killpoint.cli.main", *args, "--out", str(sandbox.out)],
                        timeout=timeout)

    @classmethod
    def install(cls, example: Path, package: str, base: Path) -> Venv:
        """A fresh venv under `base` seeing this interpreter's packages (killpoint among them, from this
        checkout), with the example project installed from a copy (so no build/ or egg-info lands in the
        checkout); `package` must then import from the venv and killpoint from the checkout."""
        project = base / example.name
        shutil.copytree(example, project,
                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist", ".pytest_cache"))
        root = base / "venv"
        make_child_venv(root)
        v = cls(root, project)
        env = {k: val for k, val in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        pip = subprocess.run([str(v.python), "-m", "pip", "install", "--no-deps", "--no-input", "--quiet",
                              str(project)], capture_output=True, text=True, timeout=600, env=env,
                             stdin=subprocess.DEVNULL)
        assert pip.returncode == 0, describe(pip)
        where = subprocess.run([str(v.python), "-c", f"import {package}, killpoint; print({package}.__file__); "
                                "print(killpoint.__file__)"], capture_output=True, text=True, timeout=60, env=env,
                               cwd=base, stdin=subprocess.DEVNULL)
        assert where.returncode == 0, describe(where)
        mine, kp = where.stdout.split()
        assert Path(mine).is_relative_to(root), f"{package} imported from {mine}, not from the venv"
        assert Path(kp).is_relative_to(REPO), f"killpoint imported from {kp}, not from this checkout"
        return v


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """A fresh venv with `acme-refunds` installed (`Venv.install`)."""
    return Venv.install(EXAMPLE, "acme_refunds", tmp_path_factory.mktemp("example-venv"))


def assert_clean(sandbox: Sandbox) -> None:
    assert sandbox.survivors() == [], "the harness left processes behind"
    assert sandbox.leftover_dirs() == [], "the harness left temp dirs or clusters behind"


def run_dirs(sandbox: Sandbox) -> list[Path]:
    return sorted(p for p in sandbox.out.iterdir() if p.is_dir()) if sandbox.out.exists() else []


@pytest.mark.slow
def test_the_whole_suite_passes_on_the_refund_agent(venv: Venv, sandbox: Sandbox) -> None:
    proc = venv.killpoint(sandbox, "run", "--steps", "acme_refunds.steps", timeout=900)
    lines = SCENARIO_LINE.findall(proc.stdout)
    verdict_lines = [line for line in proc.stdout.splitlines() if SCENARIO_LINE.match(line)]
    assert lines, describe(proc)
    bad = [line for line in verdict_lines if not line.startswith(("PASS", "SKIP"))]
    assert not bad, "scenarios that did not pass:\n" + "\n".join(bad) + "\n" + describe(proc)
    skipped_without_reason = [line for line in verdict_lines if line.startswith("SKIP") and "(" not in line]
    assert not skipped_without_reason, "\n".join(skipped_without_reason)
    assert proc.returncode == 0, describe(proc)
    assert {name for _, name in lines} >= {"crash-points", "zombie-worker", "deploy-drain", "flaky-services"}
    assert_clean(sandbox)


def test_a_per_attempt_key_fails_exactly_once_and_the_replay_line_reproduces_it(venv: Venv,
                                                                               sandbox: Sandbox) -> None:
    proc = venv.killpoint(sandbox, "run", "--steps", "acme_refunds.keyless", "--scenario", "crash-points")
    assert proc.returncode == 1, describe(proc)
    assert "exactly_once: fail" in proc.stdout, describe(proc)
    assert re.search(r"^FAIL\s+crash-points\b", proc.stdout, re.MULTILINE), describe(proc)
    lines = proc.stdout.splitlines()
    assert "reproduce the first failure with:" in lines, describe(proc)
    replay = lines[lines.index("reproduce the first failure with:") + 1].strip()
    assert replay.startswith("killpoint replay ") and "--steps acme_refunds.keyless" in replay, replay
    first_block = proc.stdout.split("--- FAIL", 2)[1]
    assert f"replay:   {replay}" in first_block, "the first failure shown is not the one the last line replays"
    assert_clean(sandbox)

    argv = shlex.split(replay)
    again = venv.killpoint(sandbox, *argv[1:])
    assert again.returncode == 1, describe(again)
    assert "exactly_once" in failing_checkers(again.stdout), describe(again)
    assert failing_checkers(again.stdout) == failing_checkers("--- FAIL" + first_block), (
        "the replay failed other checkers than the run it replays\n" + describe(again))
    assert f"replay:   {replay}" in again.stdout, describe(again)
    assert_clean(sandbox)


def test_an_agent_that_fails_with_no_faults_is_reported_first_and_no_fault_is_tried(venv: Venv,
                                                                                   sandbox: Sandbox) -> None:
    proc = venv.killpoint(sandbox, "run", "--steps", "acme_refunds.crashy", "--scenario", "crash-points")
    assert proc.returncode == 1, describe(proc)
    first = next(line for line in proc.stdout.splitlines() if line.strip() and not line.startswith("base seed"))
    assert "acme_refunds.crashy fails with no faults" in first, describe(proc)
    assert "KeyError: 'phone'" in proc.stdout, describe(proc)
    assert "crashy.py" in proc.stdout and "in notify" in proc.stdout, describe(proc)  # the traceback's tail
    assert "no faulted trial was run" in proc.stdout, describe(proc)
    assert not re.search(r"^(PASS|FAIL)\s+crash-points\b", proc.stdout, re.MULTILINE), describe(proc)
    (run_dir,) = run_dirs(sandbox)
    events = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    begun = [e for e in events if e["type"] == "run.begin"]
    assert begun and all(e["schedule"] == "" for e in begun), begun  # crash-free runs only
    assert not [e for e in events if e["type"] == "fault"]
    assert_clean(sandbox)


def test_the_examples_own_pytest_file_passes_under_the_venvs_pytest(venv: Venv, sandbox: Sandbox) -> None:
    # From the sandbox's cwd, not the project folder, so that `acme_refunds` comes from the venv's install;
    # pytest finds the project's configuration (pyproject.toml) above the tests it is given.
    proc = venv.run(sandbox, [str(venv.python), "-m", "pytest", "-q", str(venv.project / "tests"),
                              "--basetemp", str(sandbox.root / "pytest-tmp")])
    assert proc.returncode == 0, describe(proc)
    assert re.search(r"\b6 passed\b", proc.stdout), describe(proc)
    assert_clean(sandbox)
