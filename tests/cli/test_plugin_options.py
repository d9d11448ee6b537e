"""The pytest plugin's `--killpoint-allow-egress`, `--killpoint-exit-codes` and `--killpoint-worker-preload`
(the CLI's `--allow-egress`, `--exit-codes` and `--worker-preload`): given to a real inner pytest they reach
the session's `SessionConfig` and `RunOptions` as the CLI puts them; a bad one is pytest's usage error
(exit 4, no traceback) naming the plugin's option; and the crash-free run measured for `killpoint_schedule`
(`run.points.crash_free_run`, `schedules_for`) opens its session with the same hosts and preload.

No Postgres: the inner pytest only builds the configuration, and the measuring session is a fake."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import killpoint.faults.strategies
import killpoint.run.opening
import killpoint.run.points
from killpoint.plugin import WORKER, WorkerOptions, pytest_generate_tests, session_config
from killpoint.run.config import SessionConfig
from killpoint.run.points import crash_free_points, schedules_for
from tests.helpers import pythonpath

WORKER_CMD = f"{sys.executable} -c pass {{run_id}}"
"""A worker command that passes `--killpoint-worker-cmd`'s check (its program exists); never started here."""

USER_TESTS = '''
import json
import os
from pathlib import Path

from killpoint.plugin import session_config


def test_the_session_config(pytestconfig):
    cfg = session_config(pytestconfig, "tests.gallery.variants.ticket_agent", None)
    Path(os.environ["KILLPOINT_CONFIG_OUT"]).write_text(json.dumps({
        "worker_cmd": cfg.worker_cmd, "allow_egress": cfg.allow_egress, "worker_preload": cfg.worker_preload,
        "exit_codes": cfg.options.exit_codes}))
'''


def inner_pytest(tmp_path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """pytest in a subprocess on `USER_TESTS`, with only killpoint's plugin loaded (fast: no other plugins)."""
    (tmp_path / "test_user.py").write_text(textwrap.dedent(USER_TESTS))
    env = {**os.environ, "PYTHONPATH": pythonpath(), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
           "KILLPOINT_CONFIG_OUT": str(tmp_path / "config.json"), "KILLPOINT_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PYTEST_XDIST_WORKER", None)
    cmd = [sys.executable, "-m", "pytest", "-p", "killpoint.plugin", "-p", "no:cacheprovider", "--rootdir",
           str(tmp_path), f"--killpoint-out={tmp_path / 'runs'}", *options, "test_user.py"]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("options", "expected"), [
    ([f"--killpoint-worker-cmd={WORKER_CMD}", "--killpoint-allow-egress=api.example.com",
      "--killpoint-allow-egress=*", "--killpoint-worker-preload=json, os.path", "--killpoint-exit-codes=killpoint"],
     {"worker_cmd": WORKER_CMD, "allow_egress": ["api.example.com", "*"], "worker_preload": ["json", "os.path"],
      "exit_codes": "killpoint"}),
    ([f"--killpoint-worker-cmd={WORKER_CMD}", "--killpoint-allow-egress=api.example.com"],
     {"worker_cmd": WORKER_CMD, "allow_egress": ["api.example.com"], "worker_preload": None, "exit_codes": "none"}),
    ([f"--killpoint-worker-cmd={WORKER_CMD}", "--killpoint-worker-preload=NONE", "--killpoint-exit-codes=none"],
     {"worker_cmd": WORKER_CMD, "allow_egress": [], "worker_preload": [], "exit_codes": "none"}),
    (["--killpoint-allow-egress=*"],
     {"worker_cmd": None, "allow_egress": ["*"], "worker_preload": None, "exit_codes": "killpoint"}),
], ids=["all-three", "worker-default-exit-codes", "preload-none", "egress-without-worker"])
def test_the_options_reach_the_session_config(tmp_path: Path, options: list[str], expected: dict[str, Any]) -> None:
    done = inner_pytest(tmp_path, *options)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads((tmp_path / "config.json").read_text()) == expected


@pytest.mark.parametrize(("options", "says"), [
    ([f"--killpoint-worker-cmd={WORKER_CMD}", "--killpoint-worker-preload=a b"],
     "error[bad-worker-preload]: --killpoint-worker-preload 'a b' is not a comma-separated list of module names"),
    (["--killpoint-worker-preload=x"],
     "error[preload-without-worker]: --killpoint-worker-preload says what a --killpoint-worker-cmd's"),
    ([f"--killpoint-worker-cmd={WORKER_CMD}", "--killpoint-exit-codes=bogus"],
     "--killpoint-exit-codes: invalid choice: 'bogus'"),
    ([f"--killpoint-worker-cmd={WORKER_CMD}", "--killpoint-allow-egress=https://api.example.com/v1"],
     "error[bad-allow-egress]: --killpoint-allow-egress 'https://api.example.com/v1': "),
], ids=["bad-preload", "preload-without-worker", "bad-exit-codes", "url-for-a-host"])
def test_a_bad_option_is_a_usage_error_naming_the_plugins_option(tmp_path: Path, options: list[str],
                                                                  says: str) -> None:
    done = inner_pytest(tmp_path, *options)
    text = done.stdout + done.stderr
    assert done.returncode == 4, text  # pytest's usage error
    assert says in text, text
    assert "Traceback" not in text, text
    assert not (tmp_path / "config.json").exists(), "no test ran"
    assert " --worker-preload" not in text and " --worker-cmd" not in text, text  # the plugin's names only


def test_session_config_keeps_the_xdist_workers_suffix(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's options and the xdist worker's name are two things: both reach the config."""
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    options = {"--killpoint-effect": None, "--killpoint-out": "/tmp/killpoint-plugin-options-test",
               "--killpoint-dsn": None, "--killpoint-postgres": "auto", "--killpoint-spawn": "fork",
               "--killpoint-jobs": 1}
    stash = {WORKER: WorkerOptions(command=WORKER_CMD, preload=("json",), allow_egress=("h",))}
    fake = SimpleNamespace(getoption=options.__getitem__, rootpath=Path("."), stash=stash)
    cfg = session_config(fake, "tests.gallery.variants.ticket_agent", None)  # type: ignore[arg-type]
    assert cfg.run_id_suffix == ".gw1" and cfg.run_dir.name.endswith("-gw1")
    assert (cfg.worker_cmd, cfg.worker_preload, cfg.allow_egress, cfg.options.exit_codes) == \
        (WORKER_CMD, ("json",), ("h",), "none")


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[SessionConfig]:
    """The configs the measuring runs open their (fake) sessions with; each baseline reaches no points."""
    configs: list[SessionConfig] = []

    @contextlib.contextmanager
    def open_session(config: SessionConfig) -> Iterator[SimpleNamespace]:
        configs.append(config)
        yield SimpleNamespace(baseline=lambda: SimpleNamespace(events=[]))

    monkeypatch.setattr(killpoint.run.opening, "open_session", open_session)
    return configs


def test_crash_free_points_measures_with_the_sessions_hosts_and_preload(tmp_path: Path,
                                                                         opened: list[SessionConfig]) -> None:
    points = crash_free_points("steps", cache=tmp_path, worker_cmd=WORKER_CMD, allow_egress=("api.example.com",),
                               worker_preload=("json",), exit_codes="killpoint")
    assert points == {}
    [config] = opened
    assert (config.worker_cmd, config.allow_egress, config.worker_preload, config.options.exit_codes) == \
        (WORKER_CMD, ("api.example.com",), ("json",), "killpoint")

    crash_free_points("steps", cache=tmp_path, worker_cmd=WORKER_CMD)  # the defaults: as before
    assert (opened[1].allow_egress, opened[1].worker_preload, opened[1].options.exit_codes) == ((), None, "none")


def test_schedules_for_measures_with_the_sessions_hosts_and_preload(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(killpoint.run.points, "crash_free_run", lambda steps, **kw: calls.append(kw) or ({}, {}))
    monkeypatch.setattr(killpoint.faults.strategies, "deferred_schedules", lambda measure, **kw: (measure, kw))
    measure, kwargs = schedules_for("steps", worker_cmd=WORKER_CMD, allow_egress=("*",), worker_preload=(),
                                    max_faults=2)
    occurrences = kwargs.pop("occurrences")
    assert kwargs == {"max_faults": 2}  # the strategy's own options, besides the measured occurrences
    measure()
    occurrences()
    # one crash-free run for the points and their occurrences (a worker with no source is never cached)
    assert [(c["allow_egress"], c["worker_preload"]) for c in calls] == [(("*",), ())]


@pytest.mark.parametrize("pinned", [None, "tests.gallery.variants.ticket_agent"])
def test_killpoint_schedule_measures_with_the_plugins_options(monkeypatch: pytest.MonkeyPatch,
                                                              pinned: str | None) -> None:
    """`pytest_generate_tests` hands the worker's options to `crash_free_run` (once: points and occurrences);
    a test that pins a step module drops the worker (its command, adapter and preload) but keeps the hosts
    and exit codes."""
    calls: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(killpoint.run.points, "crash_free_run", lambda steps, **kw: calls.append((steps, kw)) or (
        {"email": ["effect.applied"]}, {"email": {"effect.applied": 2}}))
    worker = WorkerOptions(command=WORKER_CMD, adapter="langgraph", preload=("json",), allow_egress=("h",),
                           exit_codes="killpoint")
    options = {"--killpoint-steps": None, "--killpoint-dsn": None, "--killpoint-postgres": "auto"}
    marker = SimpleNamespace(kwargs={"steps": pinned}) if pinned else None
    params: list[list[Any]] = []
    metafunc = SimpleNamespace(fixturenames=["killpoint_schedule"],
                               config=SimpleNamespace(getoption=options.__getitem__, stash={WORKER: worker}),
                               definition=SimpleNamespace(get_closest_marker=lambda name: marker),
                               parametrize=lambda name, values, ids: params.append(values))
    pytest_generate_tests(metafunc)  # type: ignore[arg-type]
    [(steps, kw)] = calls
    assert kw["allow_egress"] == ("h",) and kw["exit_codes"] == "killpoint"
    if pinned:
        assert (steps, kw["worker_cmd"], kw["adapter"], kw["worker_preload"]) == (pinned, None, None, None)
    else:
        assert (kw["worker_cmd"], kw["adapter"], kw["worker_preload"]) == (WORKER_CMD, "langgraph", ("json",))
    assert [str(s) for s in params[0]] == ["email:effect.applied:kill", "email:effect.applied:term",
                                           "email:effect.applied:kill@2", "email:effect.applied:term@2"]
