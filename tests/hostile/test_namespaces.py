"""Sessions that cannot see each other's pids never destroy each other (issue 29, item 1).

A session in another PID namespace (``unshare -p``, a container sharing ``/tmp`` or the database) sees no
process of the first, so a pid can prove nothing to it. Liveness is proven by a lock both can see: the
advisory lock a ``--dsn`` session holds on the server, the ``flock`` an owner holds on its cluster folder.
Each case runs twice: through the CLI under ``unshare -p -f --mount-proc`` (where it works: as root on
Linux), and directly, with a second process whose every pid lookup says "no such process".
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from killpoint.env.postgres import PostgresHandle, provide
from killpoint.env.postgres.binaries import find_local
from killpoint.env.postgres.dsn import DsnServer
from tests.helpers import pythonpath
from tests.helpers.agents import wait_for
from tests.helpers.sandbox import Sandbox
from tests.hostile.userdb import fill, killpoint_schemas, snapshot

REPLAY = ("replay", "--scenario", "crash-points", "--schedule", "email:effect.applied:kill")
LONG = ("explore", "--scenario", "crash-points", "--random", "150", "--seed", "3")


def _unshare_works() -> str | None:
    """None if `unshare -p -f --mount-proc` runs here, else why not."""
    if shutil.which("unshare") is None:
        return "no unshare(1) on this machine"
    try:
        done = subprocess.run(["unshare", "-p", "-f", "--mount-proc", "true"], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare failed: {exc}"
    return None if done.returncode == 0 else f"unshare -p needs privileges here: {done.stderr.strip()[:120]}"


UNSHARE = _unshare_works()
needs_unshare = pytest.mark.skipif(UNSHARE is not None, reason=str(UNSHARE))

BLIND = """
import sys
from killpoint.env.postgres import reaper, session_schema, template
blind = lambda *a, **k: False  # no pid of the other session is visible from here
reaper.session_alive = session_schema.session_alive = template.session_alive = blind
"""


def _blind(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `code` in a second process to which every pid looks dead (as from another PID namespace)."""
    import os

    full = {**os.environ, "PYTHONPATH": pythonpath(), **(env or {})}
    return subprocess.run([sys.executable, "-c", BLIND + textwrap.dedent(code)], capture_output=True, text=True,
                          env=full, timeout=120, stdin=subprocess.DEVNULL)


@pytest.fixture
def private_root(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A cluster root of the test's own (inherited by the blind processes): a blind reaper must never reach
    the clusters of other processes on this machine."""
    import tempfile
    import uuid

    root = Path(tempfile.gettempdir()) / f"kp-ns-{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("KILLPOINT_PG_ROOT", str(root))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def user_db(pg_server: PostgresHandle, request: pytest.FixtureRequest) -> Iterator[str]:
    name = f"u_{request.node.name}_test"[:60]
    dsn = pg_server.create_database(name)
    fill(dsn)
    yield dsn
    pg_server.drop_database(name)


def _describe(proc: subprocess.CompletedProcess[str] | subprocess.Popen[str], out: str = "", err: str = "") -> str:
    if isinstance(proc, subprocess.CompletedProcess):
        out, err = proc.stdout, proc.stderr
    return f"exit {proc.returncode}\nstdout:\n{out[-3000:]}\nstderr:\n{err[-3000:]}"


def _b_beside_a(a: Sandbox, a_args: tuple[str, ...], b: Sandbox, b_args: tuple[str, ...],
                before_b: Callable[[], object], survived: Callable[[object], str | None]) -> None:
    """Session A (`a_args`) runs; once its first faulted run has begun, `before_b()` notes what A owns and
    session B (`b_args`) runs to its end under `unshare -p`; `survived(noted)` says what of A's B destroyed
    (None: nothing). A is then interrupted: it ends as a Ctrl-C'd session does, with no traceback, no false
    FAIL, nothing left running."""
    proc = a.start(*a_args)
    out = err = ""
    try:
        wait_for(lambda: a.faulted_run_began() or proc.poll() is not None, timeout=120,
                 what="session A's first faulted run")
        assert proc.poll() is None, "session A ended before B started"
        noted = before_b()
        other = subprocess.run(["unshare", "-p", "-f", "--mount-proc", *b.argv(*b_args)], capture_output=True,
                               text=True, cwd=b.cwd, env=b.env(), timeout=300, stdin=subprocess.DEVNULL)
        assert other.returncode == 0, _describe(other)
        damage = survived(noted)
        assert damage is None, damage
        assert proc.poll() is None, "session A did not survive session B"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, _describe(proc, out, err)
    assert "Traceback" not in err and "FAIL" not in out, _describe(proc, out, err)
    for box in (a, b):
        wait_for(lambda box=box: not box.survivors(), timeout=60, what="the sessions' processes to end")


# ---- through the CLI, across PID namespaces -----------------------------------------------------------------

@needs_unshare
def test_a_dsn_session_in_another_pid_namespace_leaves_a_live_one_alone(tmp_path: Path, user_db: str) -> None:
    """The issue's case: B, under `unshare -p`, used to take A's live schema for a dead session's and drop it;
    A's workers then fell through to `public` (the user's `search_path`) and overwrote the user's rows."""
    dsn = user_db + "?options=-csearch_path%3Dpublic"
    before = snapshot(user_db)

    def dropped(mine: object) -> str | None:
        return None if mine in killpoint_schemas(user_db) else "session B dropped session A's live schema"

    with Sandbox(tmp_path / "a") as a, Sandbox(tmp_path / "b") as b:
        _b_beside_a(a, (*LONG, "--dsn", dsn, "--quiet", "--out", str(a.out)),
                    b, (*REPLAY, "--dsn", dsn, "--quiet", "--out", str(b.out)),
                    lambda: killpoint_schemas(user_db)[0], dropped)
    assert snapshot(user_db) == before


@pytest.mark.skipif(find_local() is None, reason="no Postgres server binaries on this machine")
@needs_unshare
def test_a_session_in_another_pid_namespace_leaves_a_live_cluster_alone(sandbox: Sandbox) -> None:
    """Two sessions sharing one cluster root (KILLPOINT_PG_ROOT, containers sharing /tmp): B, under
    `unshare -p`, used to delete A's live data directory."""

    def folders() -> set[str]:
        names = {p.name for p in sandbox.pg_root.iterdir()}
        assert any(name.startswith("local-") for name in names), names
        return names

    def removed(before: object) -> str | None:
        gone = sorted(set(before) - {p.name for p in sandbox.pg_root.iterdir()})  # type: ignore[call-overload]
        return f"session B removed {gone} of the live session A" if gone else None

    _b_beside_a(sandbox, (*LONG, "--postgres", "local", "--quiet", "--out", str(sandbox.out)),
                sandbox, (*REPLAY, "--postgres", "local", "--quiet", "--out", str(sandbox.root / "b-runs")),
                folders, removed)
    assert sandbox.leftover_dirs() == []


# ---- directly: a second process to which every pid looks dead -------------------------------------------------

def test_a_blind_reaper_leaves_a_live_dsn_sessions_schema_alone(user_db: str, private_root: Path) -> None:
    live = DsnServer.open(user_db, allow_any_dsn=True)
    try:
        other = _blind(f"""
            from killpoint.env.postgres.dsn import DsnServer
            DsnServer.open({user_db!r}, allow_any_dsn=True).close()
        """)
        assert other.returncode == 0, _describe(other)
        assert live.schema in killpoint_schemas(user_db)
        with psycopg.connect(live.dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE still_mine (id int)")
    finally:
        live.close()
    assert killpoint_schemas(user_db) == []


def test_a_dead_dsn_sessions_schema_is_reaped_by_a_blind_reaper(user_db: str, private_root: Path) -> None:
    """The control: once the owner's connection (and so its lock) is gone, even a reaper that sees no pid
    drops the schema."""
    owner = _blind(f"""
        import os
        from killpoint.env.postgres.dsn import DsnServer
        server = DsnServer.open({user_db!r}, allow_any_dsn=True)
        print(server.schema, flush=True)
        os._exit(0)  # as a SIGKILL would: no close
    """)
    assert owner.returncode == 0, _describe(owner)
    assert killpoint_schemas(user_db) == [owner.stdout.strip()]
    other = _blind(f"""
        from killpoint.env.postgres.dsn import DsnServer
        DsnServer.open({user_db!r}, allow_any_dsn=True).close()
    """)
    assert other.returncode == 0, _describe(other)
    assert killpoint_schemas(user_db) == []


def test_a_dsn_session_never_falls_through_to_the_users_tables(user_db: str) -> None:
    """Should its schema ever be gone, a session's unqualified names are errors, never the user's tables."""
    before = snapshot(user_db)
    server = DsnServer.open(user_db + "?options=-csearch_path%3Dpublic", allow_any_dsn=True)
    try:
        with psycopg.connect(user_db, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA "{server.schema}" CASCADE')  # what a rogue reaper used to do
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            with pytest.raises(psycopg.errors.UndefinedTable):
                conn.execute("UPDATE checkpoints SET seq = 5, status = 'done'")
            with pytest.raises(psycopg.errors.InvalidSchemaName):
                conn.execute("CREATE TABLE invoices (x int)")
    finally:
        server.close()
    assert snapshot(user_db) == before


@pytest.mark.skipif(find_local() is None, reason="no Postgres server binaries on this machine")
def test_a_blind_reaper_leaves_a_live_cluster_alone(private_root: Path) -> None:
    with provide("local") as pg:
        assert pg.dir is not None
        other = _blind("""
            from killpoint.env.postgres.cleanup import reap_all
            print(reap_all())
        """)
        assert other.returncode == 0, _describe(other)
        assert pg.dir.name not in other.stdout
        assert pg.dir.exists() and pg.running
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.skipif(find_local() is None, reason="no Postgres server binaries on this machine")
def test_a_dead_owners_cluster_is_reaped_by_a_blind_reaper(private_root: Path) -> None:
    """The control: the lock dies with its owner, and then the folder goes."""
    owner = _blind("""
        import os
        from killpoint.env.postgres import open_server
        pg = open_server("local")
        print(pg.dir, flush=True)
        os._exit(0)
    """, env={"KILLPOINT_PG_NO_PDEATHSIG": "1"})
    assert owner.returncode == 0, _describe(owner)
    folder = Path(owner.stdout.strip())
    assert folder.exists()
    other = _blind("""
        from killpoint.env.postgres.cleanup import reap_all
        print(reap_all())
    """)
    assert other.returncode == 0, _describe(other)
    assert folder.name in other.stdout and not folder.exists()


def test_a_blind_reaper_leaves_a_live_template_builders_staging_alone(tmp_path: Path) -> None:
    """A template build in another namespace: its staging folder (named after a pid the reaper cannot see)
    is kept while the builder holds the key's build lock, and removed once it is free."""
    import fcntl

    cache = tmp_path / "cache"
    cache.mkdir()
    staging = cache / ".pg-template-k.999999999-1.tmp"  # a pid no process here has
    staging.mkdir()
    with open(cache / "pg-template-k.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        other = _blind(f"""
            from pathlib import Path
            from killpoint.env.postgres.template import reap_staging
            print(reap_staging(Path({str(cache)!r})))
        """)
        assert other.returncode == 0, _describe(other)
        assert staging.exists(), other.stdout
    other = _blind(f"""
        from pathlib import Path
        from killpoint.env.postgres.template import reap_staging
        print(reap_staging(Path({str(cache)!r})))
    """)
    assert other.returncode == 0 and staging.name in other.stdout, _describe(other)
    assert not staging.exists()
