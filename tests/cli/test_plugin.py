"""The pytest plugin: its fixture runs a real trial, and loading it imports nothing heavy."""

from __future__ import annotations

import subprocess
import sys

from killpoint.faults.schedule import Schedule


def test_plugin_import_is_light() -> None:
    """pytest loads the plugin in every session of every project that installs killpoint."""
    code = ("import sys, killpoint.plugin; heavy = [m for m in ('anthropic', 'psycopg', 'fake_services', "
            "'reference_agent', 'killpoint.env.environment') if m in sys.modules]; print(heavy); sys.exit(bool(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_killpoint_session_fixture_runs_a_faulted_trial(killpoint_session) -> None:
    trial = killpoint_session.trial(Schedule.parse("email:effect.applied:kill"))
    assert trial.outcome == "pass", [v.to_dict() for v in trial.failing()]
    faults = [e for e in trial.evidence.events if e["type"] == "fault"]
    assert [(f["step"], f["point"], f["action"]) for f in faults] == [("email", "effect.applied", "kill")]
    assert sum(1 for e in trial.evidence.effects if e["service"] == "mailer") == 1
