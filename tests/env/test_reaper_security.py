"""The reaper removes only what it can prove is its own (issue 13, item 3).

The cluster root is per user and private; a folder is acted on only if it is a real directory of ours whose
owner is dead; a container only if the engine shows killpoint's labels with the folder's session on it; and
a template builder killed mid-build leaves a staging folder that the next reaper removes. Docker is never
needed: the engine client is replaced by a recorder, so "no call to the engine" is observed, not assumed.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from killpoint.env.postgres import reaper
from killpoint.env.postgres.binaries import find_local
from killpoint.env.postgres.cleanup import reap_all
from killpoint.env.postgres.reaper import (
    CONTAINER_FILE,
    clusters_root,
    container_labels,
    new_cluster_dir,
    reap_orphans,
    root_mode,
    trusted_uids,
)
from killpoint.errors import EnvironmentProblem

ROOT = str(Path(__file__).resolve().parents[2])
IS_ROOT = os.geteuid() == 0


class NotFound(Exception):
    """Named like docker.errors.NotFound, which the reaper recognises by name."""


class FakeContainer:
    def __init__(self, cid: str, labels: dict[str, str], engine: FakeEngine) -> None:
        self.id, self.labels, self._engine = cid, labels, engine

    def remove(self, **kwargs: Any) -> None:
        self._engine.calls.append(("remove", self.id))
        self._engine.containers_by_id.pop(self.id, None)


class FakeEngine:
    """Stands in for ``docker.from_env()``: records every call the reaper makes."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.containers_by_id: dict[str, FakeContainer] = {}
        self.containers = self

    def add(self, labels: dict[str, str]) -> str:
        cid = uuid.uuid4().hex + uuid.uuid4().hex
        self.containers_by_id[cid] = FakeContainer(cid, labels, self)
        return cid

    def get(self, cid: str) -> FakeContainer:
        self.calls.append(("get", cid))
        if cid not in self.containers_by_id:
            raise NotFound(cid)
        return self.containers_by_id[cid]

    def close(self) -> None:
        pass


@pytest.fixture
def root(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh cluster root (``KILLPOINT_PG_ROOT``) in the temp dir, removed afterwards. Not under
    pytest's tmp_path: as root, the server user must be able to traverse to it."""
    path = Path(tempfile.gettempdir()) / f"killpoint-test-reaper-{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("KILLPOINT_PG_ROOT", str(path))
    yield path
    if path.is_symlink():
        path.unlink()
    else:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> FakeEngine:
    fake = FakeEngine()

    def client() -> FakeEngine:
        fake.calls.append(("connect", ""))
        return fake

    monkeypatch.setattr(reaper, "docker_client", client)
    return fake


def dead_session() -> str:
    """``<pid>-<ctime>`` of a process that has exited."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        ctime = int(round(psutil.Process(proc.pid).create_time() * 100))  # a zombie still has it
    finally:
        proc.wait()
    return f"{proc.pid}-{ctime}"


def plant(root: Path, kind: str = "docker", container: str | None = None) -> Path:
    """A folder named like a dead owner's, optionally with a ``container`` file."""
    folder = root / f"{kind}-{dead_session()}-planted"
    folder.mkdir(mode=0o700)
    if container is not None:
        (folder / CONTAINER_FILE).write_text(container)
    return folder


def other_uid() -> int:
    """A uid the reaper does not trust (neither ours nor the server user's)."""
    for entry in pwd.getpwall():
        if entry.pw_uid not in trusted_uids() and entry.pw_uid != 0:
            return entry.pw_uid
    pytest.skip("no other user on this machine")


# ---- the root ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("in_memory", ["1", "0"])
def test_default_root_is_per_user_private_and_ours(in_memory: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KILLPOINT_PG_ROOT", raising=False)
    monkeypatch.setenv("KILLPOINT_PG_IN_MEMORY", in_memory)
    path = clusters_root()
    base = reaper.memory_dir() or Path(tempfile.gettempdir())
    assert path == base / f"killpoint-pg-{os.geteuid()}"
    st = os.lstat(path)
    assert stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()
    assert stat.S_IMODE(st.st_mode) == (0o711 if IS_ROOT else 0o700) == root_mode()


def test_new_root_and_cluster_folders_are_private(root: Path) -> None:
    assert not root.exists()
    folder = new_cluster_dir("local")
    for path in (root, folder):
        st = os.lstat(path)
        assert st.st_uid == os.geteuid()
        assert stat.S_IMODE(st.st_mode) & 0o066 == 0, oct(st.st_mode)  # others may not list or write
    assert folder.parent == root


def test_a_too_open_root_of_ours_is_tightened_if_nobody_else_could_write(root: Path) -> None:
    root.mkdir(mode=0o755)
    root.chmod(0o755)
    assert clusters_root() == root
    assert stat.S_IMODE(os.lstat(root).st_mode) == root_mode()


@pytest.mark.parametrize("how", ["world-writable", "symlink", "foreign"])
def test_an_unsafe_root_is_refused_before_anything_is_touched(root: Path, engine: FakeEngine, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """A root others could have written is never used: reaping it raises, and nothing in it is acted on."""
    target = tmp_path / "shared"
    target.mkdir()
    planted = plant(target, container=engine.add(container_labels(Path("docker-1-1-x"))))
    if how == "world-writable":
        target.chmod(0o1777)
        monkeypatch.setenv("KILLPOINT_PG_ROOT", str(target))
    elif how == "symlink":
        root.symlink_to(target, target_is_directory=True)
    else:
        if not IS_ROOT:
            pytest.skip("needs root to give the folder to another user")
        os.chown(target, other_uid(), -1)
        target.chmod(0o755)
        monkeypatch.setenv("KILLPOINT_PG_ROOT", str(target))
    with pytest.raises(EnvironmentProblem) as err:
        reap_orphans()
    assert err.value.code == "cluster-root-unsafe"
    with pytest.raises(EnvironmentProblem):
        new_cluster_dir("local")
    assert planted.exists() and engine.calls == []


# ---- folders and containers -------------------------------------------------------------------------------

def test_a_planted_container_name_is_refused_without_calling_the_engine(root: Path, engine: FakeEngine) -> None:
    """The issue's attack: a dead owner's folder whose ``container`` names an arbitrary container."""
    clusters_root()
    planted = plant(root, container="production-db\n")
    reap_orphans()
    assert engine.calls == []  # not even a connection to the engine
    assert not planted.exists()  # the folder itself is ours (our private root, our uid): cleaned


def test_a_container_without_our_labels_is_never_removed(root: Path, engine: FakeEngine) -> None:
    clusters_root()
    theirs = engine.add({"com.example.app": "billing"})
    mislabelled = plant(root, container=theirs)
    # killpoint's labels, but another folder's session: an id copied from a live cluster of someone else
    other = engine.add(container_labels(root / f"docker-{dead_session()}-other"))
    copied = plant(root, container=other)
    reap_orphans()
    assert ("remove", theirs) not in engine.calls and ("remove", other) not in engine.calls
    assert ("get", theirs) in engine.calls and ("get", other) in engine.calls
    assert theirs in engine.containers_by_id and other in engine.containers_by_id
    assert not mislabelled.exists() and not copied.exists()


def test_a_dead_owners_labelled_container_is_removed(root: Path, engine: FakeEngine) -> None:
    """The control: with labels that match its folder, the container is removed (so the tests above could
    have seen a removal)."""
    clusters_root()
    folder = plant(root)
    cid = engine.add(container_labels(folder))
    (folder / CONTAINER_FILE).write_text(cid)
    assert folder.name in reap_orphans()
    assert ("remove", cid) in engine.calls and cid not in engine.containers_by_id
    assert not folder.exists()


def test_the_folder_is_kept_while_the_engine_cannot_be_asked(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A recorded container whose engine is down may still run: its record is kept for a later reaper."""
    clusters_root()
    folder = plant(root, container="ab" * 32)

    def no_engine() -> None:
        raise ConnectionError("no engine")

    monkeypatch.setattr(reaper, "docker_client", no_engine)
    assert reap_orphans() == []
    assert (root / f"reaping-{folder.name}" / CONTAINER_FILE).exists()


@pytest.mark.skipif(not IS_ROOT, reason="needs root to give a folder to another user")
def test_a_folder_owned_by_another_user_is_left_alone(root: Path, engine: FakeEngine) -> None:
    clusters_root()
    folder = plant(root, kind="local", container=engine.add(container_labels(Path("docker-1-1-x"))))
    os.chown(folder / CONTAINER_FILE, other_uid(), -1)
    os.chown(folder, other_uid(), -1)
    assert reap_orphans() == []
    assert folder.exists() and (folder / CONTAINER_FILE).exists()  # not even claimed (renamed)
    assert engine.calls == []


def test_a_symlink_named_like_a_folder_is_not_followed(root: Path, engine: FakeEngine, tmp_path: Path) -> None:
    clusters_root()
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "precious").write_text("keep me")
    (target / CONTAINER_FILE).write_text(engine.add(container_labels(Path("docker-1-1-x"))))
    link = root / f"docker-{dead_session()}-link"
    link.symlink_to(target, target_is_directory=True)
    reap_orphans()
    assert link.is_symlink() and (target / "precious").read_text() == "keep me"
    assert engine.calls == []


def test_live_owners_folder_is_left_alone(root: Path, engine: FakeEngine) -> None:
    mine = new_cluster_dir("docker")
    cid = engine.add(container_labels(mine))
    (mine / CONTAINER_FILE).write_text(cid)
    assert reap_orphans() == []
    assert mine.exists() and engine.calls == []


def test_docker_provider_labels_its_container_for_the_reaper(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The labels the docker provider asks testcontainers for are exactly those the reaper requires."""
    pytest.importorskip("testcontainers.community.postgres")
    from testcontainers.community.postgres import PostgresContainer

    from killpoint.env.postgres.docker import DockerServer

    seen: list[dict[str, Any]] = []

    def fake_start(self: Any) -> Any:
        seen.append(dict(self._kwargs))
        return self

    monkeypatch.setattr(PostgresContainer, "start", fake_start)
    monkeypatch.setattr("testcontainers.core.container.DockerClient", lambda **kw: object())  # no engine here
    folder = new_cluster_dir("docker")
    DockerServer._run_container(55432, container_labels(folder))
    assert seen and seen[0]["labels"] == container_labels(folder)
    session = f"{os.getpid()}-{int(round(psutil.Process().create_time() * 100))}"
    assert seen[0]["labels"] == {"killpoint": "postgres", "killpoint.session": session,
                                 "killpoint.cluster": folder.name}


# ---- the template builder's staging folder ----------------------------------------------------------------

BUILDER = """
import sys, threading
from killpoint.env.postgres import template
from killpoint.env.postgres.binaries import find_local, run_as
real = template.copy_tree
def copy_then_hang(src, dst):
    real(src, dst)
    print(dst.parent, flush=True)  # the staging folder, now full
    threading.Event().wait()
template.copy_tree = copy_then_hang
template.ensure_template(find_local(), run_as())
"""


@pytest.mark.skipif(find_local() is None, reason="no Postgres server binaries on this machine")
def test_a_builder_killed_mid_build_leaves_staging_that_the_next_reaper_removes(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("KILLPOINT_CACHE_DIR", str(cache))
    clusters_root()
    env = {**os.environ, "PYTHONPATH": ROOT}
    builder = subprocess.Popen([sys.executable, "-c", BUILDER], stdout=subprocess.PIPE, text=True, env=env)
    assert builder.stdout is not None
    line = builder.stdout.readline().strip()  # blocks until the staging copy is complete
    builder.send_signal(signal.SIGKILL)
    builder.wait()
    builder.stdout.close()
    assert line, "the builder died before staging"
    staging = Path(line)
    assert staging.parent == cache and (staging / "data" / "PG_VERSION").exists()
    assert any(p.name.startswith("template-") for p in root.iterdir())  # its initdb folder too
    # a live builder's staging folder (this process's) must survive the same sweep
    live = cache / f".pg-template-other.{os.getpid()}-{int(round(psutil.Process().create_time() * 100))}.tmp"
    live.mkdir()

    reap_all()

    assert not staging.exists()
    assert not any(p.name.startswith("template-") for p in root.iterdir())
    assert live.exists()
