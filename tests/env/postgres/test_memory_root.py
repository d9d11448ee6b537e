"""Owned clusters live in memory where the machine has room (`reaper.memory_dir`), else in the temp folder.

Why it matters: a cluster is ~1,000 files, and on a disk file system their creation was ~1 CPU-second of
every session's start (the template's copy, the run database). The choice is the memory file system at
`/dev/shm` when it is a tmpfs this user can write with `MEMORY_ROOM` free (a container's 64 MB `/dev/shm`
is passed over), unless `KILLPOINT_PG_IN_MEMORY=0` or `KILLPOINT_PG_ROOT` says otherwise; the reaper looks
in both default roots, as a session that found no room used the other.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from killpoint.env.postgres import reaper
from killpoint.env.postgres.binaries import find_local
from killpoint.env.postgres.local import LocalServer
from tests.env.postgres.test_postgres_reaper import gone, start_holder

SHM_IS_TMPFS = reaper._mount_type(reaper.MEMORY_DIR) == reaper.MEMORY_FS
needs_tmpfs = pytest.mark.skipif(not SHM_IS_TMPFS, reason="/dev/shm is not a tmpfs on this machine")


@pytest.fixture
def default_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """No `KILLPOINT_PG_ROOT` and no `KILLPOINT_PG_IN_MEMORY`: the choice a user's session makes."""
    monkeypatch.delenv("KILLPOINT_PG_ROOT", raising=False)
    monkeypatch.delenv(reaper.MEMORY_VAR, raising=False)


@pytest.fixture
def private_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temp folder of the test's own (short, traversable by the server user), whose
    `killpoint-pg-<uid>` is the reaper's temp-folder root here and in a holder given it as TMPDIR."""
    path = Path(tempfile.mkdtemp(prefix="kp-mem-", dir="/tmp"))
    path.chmod(0o755)
    monkeypatch.setattr(reaper, "_tmp_root", lambda: path / f"killpoint-pg-{os.geteuid()}")
    yield path
    root = path / f"killpoint-pg-{os.geteuid()}"
    for folder in root.iterdir() if root.exists() else []:
        reaper.destroy(folder)
    shutil.rmtree(path, ignore_errors=True)


@needs_tmpfs
def test_a_tmpfs_with_room_holds_the_clusters(default_root: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reaper, "MEMORY_ROOM", 1 << 20)
    assert reaper.memory_dir() == reaper.MEMORY_DIR
    assert reaper.root_path() == reaper.MEMORY_DIR / f"killpoint-pg-{os.geteuid()}"


@needs_tmpfs
def test_a_tmpfs_without_room_is_passed_over(default_root: None, monkeypatch: pytest.MonkeyPatch) -> None:
    vfs = os.statvfs(reaper.MEMORY_DIR)
    monkeypatch.setattr(reaper, "MEMORY_ROOM", vfs.f_bavail * vfs.f_frsize + (1 << 30))
    assert reaper.memory_dir() is None
    assert reaper.root_path() == Path(tempfile.gettempdir()) / f"killpoint-pg-{os.geteuid()}"


def test_a_folder_that_is_not_a_memory_mount_is_passed_over(
        default_root: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(reaper, "MEMORY_DIR", tmp_path)  # a folder, not a mount point of its own
    monkeypatch.setattr(reaper, "MEMORY_ROOM", 1)
    assert reaper.memory_dir() is None
    assert reaper.root_path() == Path(tempfile.gettempdir()) / f"killpoint-pg-{os.geteuid()}"


@needs_tmpfs
@pytest.mark.parametrize("value", ["0", "no", "off", "false"])
def test_killpoint_pg_in_memory_off_keeps_them_in_the_temp_folder(
        value: str, default_root: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reaper, "MEMORY_ROOM", 1)
    monkeypatch.setenv(reaper.MEMORY_VAR, value)
    assert reaper.memory_dir() is None
    assert reaper.root_path() == Path(tempfile.gettempdir()) / f"killpoint-pg-{os.geteuid()}"


@needs_tmpfs
def test_killpoint_pg_root_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(reaper, "MEMORY_ROOM", 1)
    monkeypatch.setenv("KILLPOINT_PG_ROOT", str(tmp_path / "r"))
    assert reaper.root_path() == tmp_path / "r"
    assert reaper.reapable_roots() == [tmp_path / "r"]  # no other root is looked at


@pytest.mark.skipif(find_local() is None, reason="no Postgres server binaries on this machine")
def test_a_local_server_lives_in_the_chosen_root_and_leaves_nothing(default_root: None) -> None:
    """The real provider: its cluster folder is in `root_path()` (in memory on a machine with room), the
    server answers, and closing it removes the folder."""
    bins = find_local()
    assert bins is not None
    server = LocalServer.start(bins)
    try:
        assert server.dir is not None and server.dir.parent == reaper.root_path()
        if reaper.memory_dir() is not None:
            assert str(server.dir).startswith(str(reaper.MEMORY_DIR) + os.sep), server.dir
        import psycopg  # noqa: PLC0415

        with psycopg.connect(server.dsn) as conn:
            assert conn.execute("select 1").fetchone() == (1,)
    finally:
        folder = server.dir
        server.close()
    assert folder is not None and not folder.exists()


@needs_tmpfs
@pytest.mark.skipif(find_local() is None, reason="no Postgres server binaries on this machine")
@pytest.mark.parametrize("holder_in_memory", ["1", "0"])
def test_the_reaper_looks_in_the_root_it_did_not_choose(
        holder_in_memory: str, default_root: None, private_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A SIGKILLed owner's cluster in memory is reaped by a session that chose the temp folder, and the other
    way round: the room in memory is decided per session."""
    tmp_root = private_tmp / f"killpoint-pg-{os.geteuid()}"
    holder, info = start_holder({"KILLPOINT_PG_NO_PDEATHSIG": "1", reaper.MEMORY_VAR: holder_in_memory,
                                 "TMPDIR": str(private_tmp)})
    folder = Path(info["dir"])
    try:
        expected = reaper.MEMORY_DIR / f"killpoint-pg-{os.geteuid()}" if holder_in_memory == "1" else tmp_root
        assert folder.parent == expected, folder
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        monkeypatch.setenv(reaper.MEMORY_VAR, "0" if holder_in_memory == "1" else "1")
        chosen = reaper.root_path()
        assert chosen != folder.parent  # this reaper chose the other root
        assert folder.name in reaper.reap_orphans()
        assert not folder.exists() and gone(info["pid"])
    finally:
        holder.kill()
        holder.wait()
        if folder.exists():
            reaper.destroy(folder)


def test_a_planted_memory_root_is_refused_naming_the_way_to_disk(
        default_root: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """`/dev/shm` is writable by every user, as `/tmp` is: a root planted there (here a symlink) is refused in
    one line whose fix also names `KILLPOINT_PG_IN_MEMORY=0`."""
    memory = Path(tempfile.mkdtemp(prefix="kp-mem-plant-"))
    try:
        monkeypatch.setattr(reaper, "MEMORY_DIR", memory)
        monkeypatch.setattr(reaper, "memory_dir", lambda: memory)
        (memory / f"killpoint-pg-{os.geteuid()}").symlink_to(memory)
        with pytest.raises(reaper.EnvironmentProblem) as err:
            reaper.new_cluster_dir("local")
        assert err.value.code == "cluster-root-unsafe"
        assert f"{reaper.MEMORY_VAR}=0" in err.value.fix, err.value.fix
    finally:
        shutil.rmtree(memory, ignore_errors=True)


@pytest.mark.skipif(find_local() is None, reason="no Postgres server binaries on this machine")
def test_a_crashed_servers_dynamic_shared_memory_goes_with_its_folder(default_root: None) -> None:
    """A SIGKILLed postmaster never removes its dynamic shared memory: in `/dev/shm` (Postgres's default) it
    stayed there for good. An owned server keeps it in files of its data directory, removed with the folder."""
    bins = find_local()
    assert bins is not None
    before = {p.name for p in Path("/dev/shm").glob("PostgreSQL.*")}
    server = LocalServer.start(bins)
    try:
        import psycopg  # noqa: PLC0415

        with psycopg.connect(server.dsn) as conn:
            assert conn.execute("show dynamic_shared_memory_type").fetchone() == ("mmap",)
        assert server.dir is not None and list((server.data / "pg_dynshmem").glob("mmap.*"))
        server.crash(hard=True)
        server.restart()
    finally:
        folder = server.dir
        server.close()
    assert folder is not None and not folder.exists()
    # No server killpoint starts makes a posix segment now, so none appeared meanwhile (before: one per start).
    assert {p.name for p in Path("/dev/shm").glob("PostgreSQL.*")} - before == set()
