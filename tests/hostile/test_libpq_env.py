"""libpq's environment variables of the user's (issue 29, item 4).

``PGSSLMODE``, ``PGOPTIONS``, ``PGTARGETSESSIONATTRS``, ``PGSERVICE``... are the user's settings for the user's
servers. On the server killpoint starts itself they are ignored: by the harness's connections and by the
workers' (each case used to be a traceback). On a database the user names (``--dsn``) they apply, as to any
libpq program, and a refusal is one line and exit 2.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.helpers.sandbox import Sandbox

REPLAY = ("replay", "--scenario", "crash-points", "--schedule", "email:effect.applied:kill")
READ_ONLY = "-c default_transaction_read_only=on"

OWNED_CASES = {
    "sslmode-require": {"PGSSLMODE": "require"},
    "options-read-only": {"PGOPTIONS": READ_ONLY},
    "options-statement-timeout": {"PGOPTIONS": "-c statement_timeout=1"},
    "target-read-only": {"PGTARGETSESSIONATTRS": "read-only"},
    "service-unknown": {"PGSERVICE": "production"},
    "servicefile-missing": {"PGSERVICE": "kp", "PGSERVICEFILE": "/nonexistent/pg_service.conf"},
    "everything-at-once": {
        "PGSSLMODE": "verify-full", "PGGSSENCMODE": "require", "PGCHANNELBINDING": "require",
        "PGREQUIREAUTH": "scram-sha-256", "PGHOSTADDR": "192.0.2.1", "PGHOST": "/nonexistent", "PGPORT": "1",
        "PGUSER": "nobody", "PGDATABASE": "prod", "PGPASSFILE": "/dev/zero", "PGCONNECT_TIMEOUT": "1",
        "PGCLIENTENCODING": "LATIN1", "PGDATESTYLE": "SQL, DMY", "PGTZ": "Pacific/Chatham",
        "PGAPPNAME": "the-users-app", "PGLOADBALANCEHOSTS": "random", "PGSSLNEGOTIATION": "direct",
    },
}


def _describe(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"


def _run(sandbox: Sandbox, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(sandbox.argv(*args, "--out", str(sandbox.out)), capture_output=True, text=True,
                          cwd=sandbox.cwd, env={**sandbox.env(), **env}, timeout=300, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("env", OWNED_CASES.values(), ids=OWNED_CASES.keys())
def test_the_users_libpq_variables_never_reach_killpoints_own_server(sandbox: Sandbox, env: dict[str, str]) -> None:
    proc = _run(sandbox, env, *REPLAY)
    assert proc.returncode == 0, _describe(proc)
    assert re.search(r"^PASS\s+crash-points\s", proc.stdout, re.MULTILINE), _describe(proc)
    assert sandbox.survivors() == [] and sandbox.leftover_dirs() == []


def test_the_users_libpq_variables_are_back_after_a_session_in_process() -> None:
    """``provide`` (the pytest plugin runs in the user's process) puts the variables back when it ends. In a
    fresh interpreter: this test process may itself be inside a killpoint session (the plugin's fixture)."""
    code = (
        "import os\n"
        "from killpoint.env.postgres import libpq_env\n"
        "os.environ['PGSSLMODE'] = 'require'\n"
        "with libpq_env.ignored():\n"
        "    with libpq_env.ignored():\n"
        "        assert 'PGSSLMODE' not in os.environ\n"
        "    assert 'PGSSLMODE' not in os.environ\n"
        "assert os.environ['PGSSLMODE'] == 'require'\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


DSN_CASES = {
    "sslmode-require": ({"PGSSLMODE": "require"}, "dsn-refused"),
    "options-read-only": ({"PGOPTIONS": READ_ONLY}, "dsn-read-only"),
    "target-standby": ({"PGTARGETSESSIONATTRS": "standby"}, "dsn-refused"),
    "service-unknown": ({"PGSERVICE": "production"}, "dsn-refused"),
    "channel-binding": ({"PGCHANNELBINDING": "require"}, "dsn-refused"),
    "client-encoding-bogus": ({"PGCLIENTENCODING": "klingon"}, "dsn-refused"),
}


@pytest.mark.parametrize(("env", "code"), DSN_CASES.values(), ids=DSN_CASES.keys())
def test_on_a_users_database_libpq_variables_apply_and_a_refusal_is_one_line(
        sandbox: Sandbox, pg_dsn: str, env: dict[str, str], code: str) -> None:
    proc = _run(sandbox, env, *REPLAY, "--dsn", pg_dsn, "--allow-any-dsn")
    assert proc.returncode == 2, _describe(proc)
    line = proc.stderr.strip()
    assert line.startswith(f"killpoint: error[{code}]: ") and len(line.splitlines()) == 1, _describe(proc)
    assert sandbox.survivors() == [] and sandbox.leftover_dirs() == []


def test_pgoptions_applies_to_every_connection_of_a_dsn_session(sandbox: Sandbox, pg_dsn: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """libpq reads PGOPTIONS only for a DSN without options, and every session DSN has some: killpoint puts
    the user's PGOPTIONS into them, so the workers see the user's settings as their first connection did."""
    proc = _run(sandbox, {"PGOPTIONS": "-c work_mem=5MB"}, *REPLAY, "--dsn", pg_dsn, "--allow-any-dsn")
    assert proc.returncode == 0, _describe(proc)
    from killpoint.env.postgres.dsn import with_env_options

    monkeypatch.setenv("PGOPTIONS", "-c work_mem=5MB")
    assert "work_mem%3D5MB" in with_env_options(pg_dsn)
    assert with_env_options(pg_dsn + "?options=-cwork_mem%3D7MB") == pg_dsn + "?options=-cwork_mem%3D7MB"


def test_a_workers_environment_on_an_owned_server_has_no_libpq_variables() -> None:
    from killpoint.env.postgres import libpq_env

    assert libpq_env.without({"PGSSLMODE": "require", "PGSERVICE": "x", "HOME": "/root"}) == {"HOME": "/root"}
