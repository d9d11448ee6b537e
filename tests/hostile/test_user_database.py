"""killpoint beside a user's data (issue 13, items 1 and 2): on a ``--dsn`` database that already holds the
user's own ``checkpoints``, ``jobs``, ``leases``... (and run ids killpoint itself uses), every scenario, a
Ctrl-C and a SIGKILL leave the user's database byte-identical; two sessions on one database pass together;
a DSN that reaches a non-test database through libpq's environment is refused before anything is written.
"""

from __future__ import annotations

import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from killpoint.env.postgres import PostgresHandle
from tests.helpers.agents import wait_for
from tests.helpers.sandbox import Sandbox
from tests.hostile.userdb import OTHER_SHAPE_DDL, fill, killpoint_schemas, snapshot


@pytest.fixture
def user_db(pg_server: PostgresHandle, request: pytest.FixtureRequest) -> Iterator[str]:
    """A database of the user's, filled with their tables and rows (dropped afterwards)."""
    name = f"u_{request.node.name}_test"
    dsn = pg_server.create_database(name)
    fill(dsn)
    yield dsn
    pg_server.drop_database(name)


def _describe(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"


def _args(sandbox: Sandbox, dsn: str) -> tuple[str, ...]:
    return ("--dsn", dsn, "--quiet", "--out", str(sandbox.out))


def _clean(sandbox: Sandbox) -> None:
    assert sandbox.survivors() == []
    assert sandbox.leftover_dirs() == []


@pytest.mark.parametrize("scenario", ["fleet", "stalled-sweep"])
def test_a_scenario_leaves_the_users_database_byte_identical(sandbox: Sandbox, user_db: str, scenario: str) -> None:
    before = snapshot(user_db)
    proc = sandbox.run("run", "--scenario", scenario, *_args(sandbox, user_db))
    assert proc.returncode == 0, _describe(proc)
    assert snapshot(user_db) == before
    _clean(sandbox)


def test_a_users_checkpoints_table_of_another_shape_is_no_obstacle(sandbox: Sandbox, pg_server: PostgresHandle) -> None:
    dsn = pg_server.create_database("u_other_shape_test")
    try:
        fill(dsn, OTHER_SHAPE_DDL)
        before = snapshot(dsn)
        proc = sandbox.run("replay", "--scenario", "crash-points", "--schedule", "email:effect.applied:kill",
                           *_args(sandbox, dsn))
        assert proc.returncode == 0, _describe(proc)
        assert snapshot(dsn) == before  # no trigger left on it: the user's own INSERT still works
    finally:
        pg_server.drop_database("u_other_shape_test")
    _clean(sandbox)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_run_leaves_the_users_database_byte_identical(sandbox: Sandbox, user_db: str,
                                                                     sig: signal.Signals) -> None:
    before = snapshot(user_db)
    proc = sandbox.start("run", "--scenario", "fleet", *_args(sandbox, user_db))
    try:
        wait_for(lambda: sandbox.faulted_run_began() or proc.poll() is not None, timeout=120, what="a faulted run to begin")
        proc.send_signal(sig)
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode in (130, 143), proc.returncode
    assert snapshot(user_db) == before
    _clean(sandbox)


def test_a_sigkilled_sessions_schema_is_reaped_by_the_next_run(sandbox: Sandbox, user_db: str) -> None:
    before = snapshot(user_db)
    proc = sandbox.start("run", "--scenario", "fleet", *_args(sandbox, user_db))
    try:
        sandbox.until_faulted_run(proc, timeout=120)
        proc.kill()
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    wait_for(lambda: not sandbox.survivors(), timeout=60, what="the killed harness's children to die with it")
    left = killpoint_schemas(user_db)
    assert len(left) == 1, left  # what a SIGKILL cannot clean up: the session's schema, and only that
    assert {k: v for k, v in snapshot(user_db).items() if k.startswith("rows:")} == \
        {k: v for k, v in before.items() if k.startswith("rows:")}
    proc2 = sandbox.run("replay", "--scenario", "crash-points", "--schedule", "email:effect.applied:kill",
                        *_args(sandbox, user_db))
    assert proc2.returncode == 0, _describe(proc2)
    assert snapshot(user_db) == before  # the dead session's schema was provably ours, and is gone
    _clean(sandbox)


def test_a_live_sessions_schema_is_never_reaped(sandbox: Sandbox, user_db: str) -> None:
    """A schema named like ours but whose comment does not prove a dead session of this host is left alone."""
    import psycopg

    with psycopg.connect(user_db, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA killpoint_s_0123456789ab")
        conn.execute("COMMENT ON SCHEMA killpoint_s_0123456789ab IS 'the user''s own, named like ours'")
        conn.execute(f"CREATE SCHEMA killpoint_s_abcdefabcdef; COMMENT ON SCHEMA killpoint_s_abcdefabcdef IS "
                     f"'killpoint session {psutil.Process().pid}-0 on elsewhere.example'")
    before = snapshot(user_db)
    proc = sandbox.run("replay", "--scenario", "crash-points", "--schedule", "email:effect.applied:kill",
                       *_args(sandbox, user_db))
    assert proc.returncode == 0, _describe(proc)
    assert snapshot(user_db) == before
    _clean(sandbox)


def test_two_sessions_on_one_database_pass_together(tmp_path: Path, user_db: str) -> None:
    before = snapshot(user_db)
    results: dict[int, subprocess.CompletedProcess[str]] = {}
    go = threading.Barrier(2)

    def one(i: int, box: Sandbox) -> None:
        go.wait()
        results[i] = box.run("run", "--scenario", "fleet", *_args(box, user_db), timeout=600)

    with Sandbox(tmp_path / "a") as a, Sandbox(tmp_path / "b") as b:
        threads = [threading.Thread(target=one, args=(i, box)) for i, box in enumerate((a, b))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for i in (0, 1):
            assert results[i].returncode == 0, _describe(results[i])
        for box in (a, b):
            _clean(box)
    assert snapshot(user_db) == before


def test_pgdatabase_naming_a_non_test_database_is_refused(sandbox: Sandbox, pg_server: PostgresHandle) -> None:
    prod = pg_server.create_database("prod2")  # created by killpoint's provider: named prod2 on owned servers
    name = prod.rsplit("/", 1)[1]
    if "test" in name:
        pytest.skip(f"the server names its databases {name!r}; a non-test name is needed")
    try:
        no_db = pg_server.admin_dsn.rsplit("/", 1)[0]  # postgresql://user@host:port, naming no database
        before = snapshot(prod)
        env = {"PGDATABASE": name}
        proc = subprocess.run(sandbox.argv("run", "--scenario", "fleet", "--dsn", no_db, "--out", str(sandbox.out)),
                              capture_output=True, text=True, cwd=sandbox.cwd, env={**sandbox.env(), **env},
                              timeout=120, stdin=subprocess.DEVNULL)
        assert proc.returncode == 2, _describe(proc)
        assert proc.stderr.strip().startswith("killpoint: error[dsn-not-test]: ") and name in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert snapshot(prod) == before
    finally:
        pg_server.drop_database("prod2")
    _clean(sandbox)
    assert not sandbox.out.exists() or not any(sandbox.out.iterdir())


def test_a_service_file_reaching_a_non_test_database_is_refused_after_connecting(
        sandbox: Sandbox, pg_server: PostgresHandle) -> None:
    """The DSN's text names a `test` user and no database; libpq's service file sends it to `prod2`: the
    check reads `current_database()`, not the text."""
    import psycopg

    prod = pg_server.create_database("prod2")
    name = prod.rsplit("/", 1)[1]
    try:
        with psycopg.connect(pg_server.admin_dsn, autocommit=True) as conn:
            host, port = conn.info.host, conn.info.port
            conn.execute("DROP ROLE IF EXISTS kp_test_user")
            conn.execute("CREATE ROLE kp_test_user LOGIN SUPERUSER")
        services = sandbox.root / "pg_service.conf"
        services.write_text(f"[kp]\ndbname={name}\nhost={host}\nport={port}\n")
        before = snapshot(prod)
        proc = subprocess.run(sandbox.argv("run", "--scenario", "fleet", "--dsn", "service=kp user=kp_test_user",
                                           "--out", str(sandbox.out)),
                              capture_output=True, text=True, cwd=sandbox.cwd,
                              env={**sandbox.env(), "PGSERVICEFILE": str(services)}, timeout=120,
                              stdin=subprocess.DEVNULL)
        assert proc.returncode == 2, _describe(proc)
        line = proc.stderr.strip()
        assert line.startswith("killpoint: error[dsn-not-test]: ") and "actually reached" in line, line
        assert len(line.splitlines()) == 1, line
        assert snapshot(prod) == before
    finally:
        pg_server.drop_database("prod2")
        with psycopg.connect(pg_server.admin_dsn, autocommit=True) as conn:
            conn.execute("DROP ROLE IF EXISTS kp_test_user")
    _clean(sandbox)
