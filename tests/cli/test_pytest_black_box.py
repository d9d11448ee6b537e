"""The pytest plugin on a black-box worker: `--killpoint-worker-cmd` and `--killpoint-adapter` (the CLI's
`--worker-cmd` and `--adapter`) put a LangGraph graph under the same fixtures as a step module.
`killpoint_schedule` gives one test id per single fault its crash-free run reaches (measured through the
worker and cached by its source), the keyed graph passes them all, and the bare one fails the kill after
Resend applied the email, with a replay line that names the worker and its adapter. A bad worker command is
pytest's usage error before any session starts.

A real inner pytest (a subprocess) on a user's test file, against the session's Postgres."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import REPO, pythonpath

pytest.importorskip("langgraph.checkpoint.postgres", reason="pip install 'killpoint[langgraph]'")
pytest.importorskip("resend", reason="pip install 'killpoint[langgraph]'")

USER_TESTS = '''
import killpoint


def test_every_single_fault(killpoint_session, killpoint_schedule):
    killpoint.expect(killpoint_session.trial(killpoint_schedule))
'''
GRAPH = REPO / "examples" / "langgraph" / "invoice_graph.py"


def inner_pytest(tmp_path: Path, pg_dsn: str, *options: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_graph.py").write_text(textwrap.dedent(USER_TESTS))
    env = {**os.environ, "PYTHONPATH": pythonpath(), "KILLPOINT_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PYTEST_XDIST_WORKER", None)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "--rootdir", str(tmp_path),
           f"--killpoint-dsn={pg_dsn}", *options, "test_graph.py"]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)


def worker(keyed: bool) -> str:
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(GRAPH))} {{run_id}}" + (" --keyed" if keyed else "")


@pytest.mark.slow  # two inner pytest sessions of 16 LangGraph trials each
def test_a_langgraph_graph_under_the_plugins_fixtures(tmp_path: Path, pg_dsn: str) -> None:
    keyed = inner_pytest(tmp_path, pg_dsn, f"--killpoint-worker-cmd={worker(True)}", "--killpoint-adapter=langgraph")
    text = keyed.stdout + keyed.stderr
    assert keyed.returncode == 0 and "16 passed" in text, text
    assert list((tmp_path / "cache" / "points").glob("worker-*.json")), "the worker's points are cached"

    bare = inner_pytest(tmp_path, pg_dsn, f"--killpoint-worker-cmd={worker(False)}", "--killpoint-adapter=langgraph")
    text = bare.stdout + bare.stderr
    assert bare.returncode == 1, text
    assert "FAILED test_graph.py::test_every_single_fault[email:effect.applied:kill]" in text, text
    replay = next(line for line in text.splitlines() if "killpoint replay" in line and "effect.applied:kill" in line)
    assert "--worker-cmd" in replay and "--adapter langgraph" in replay, replay
    assert "--keyed" not in replay, replay  # the bare worker's own command, not the keyed one's cached points


@pytest.mark.parametrize(("options", "says"), [
    (["--killpoint-worker-cmd=python no_such_graph.py {run_id}"], "error[worker-cmd-not-found]"),
    (["--killpoint-adapter=langgraph"], "error[adapter-without-worker]"),
    ([f"--killpoint-worker-cmd={sys.executable} -c pass {{run_id}}", "--killpoint-adapter=temporal"],
     "temporal"),
], ids=["no-such-script", "adapter-without-worker", "unknown-adapter"])
def test_a_bad_worker_option_is_a_usage_error_before_any_session(tmp_path: Path, pg_dsn: str, options: list[str],
                                                                 says: str) -> None:
    done = inner_pytest(tmp_path, pg_dsn, *options)
    text = done.stdout + done.stderr
    assert done.returncode == 4 and says in text and "--killpoint-" in text, text
    assert "Traceback" not in text, text
    assert not (tmp_path / ".killpoint" / "runs").exists() or not any((tmp_path / ".killpoint" / "runs").iterdir())
