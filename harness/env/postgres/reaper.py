"""Cluster folders with an owner, and the reaper that removes those whose owner died.

Every owned server (local, embedded, docker) lives in a folder ``<tmp>/killpoint-pg/<kind>-<pid>-<ctime>-<rand>``
named after the owning process: its pid and its create time (so a recycled pid is not taken for the
owner). ``reap_orphans()`` runs at every ``provide()``: for each folder whose owner is gone it kills the
server recorded there (the postmaster from ``data/postmaster.pid``, a container id in ``container``),
then removes the folder. A folder is claimed by renaming it first, so two reapers never fight over one.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from pathlib import Path

import psutil

from killpoint.env.postgres.process import stop_postmaster

NAME_RE = re.compile(r"^(?P<kind>[a-z]+)-(?P<pid>\d+)-(?P<ctime>\d+)-[^/]+$")
CONTAINER_FILE = "container"
STALE_REAPING_SECONDS = 60.0


def clusters_root() -> Path:
    """``$KILLPOINT_PG_ROOT`` or ``<tmp>/killpoint-pg``. Shared by all users like ``/tmp`` itself (mode 1777:
    anyone may add a cluster, only its owner may remove it), so a server running as another user reaches it."""
    root = Path(os.environ.get("KILLPOINT_PG_ROOT") or Path(tempfile.gettempdir()) / "killpoint-pg")
    root.mkdir(parents=True, exist_ok=True)
    if root.stat().st_uid == os.geteuid() and root.stat().st_mode & 0o7777 != 0o1777:
        root.chmod(0o1777)
    return root


def _ctime_cs(proc: psutil.Process) -> int:
    return int(round(proc.create_time() * 100))


def new_cluster_dir(kind: str) -> Path:
    """A fresh folder owned by this process (name carries pid + create time), mode 0755."""
    me = psutil.Process()
    path = Path(tempfile.mkdtemp(prefix=f"{kind}-{me.pid}-{_ctime_cs(me)}-", dir=clusters_root()))
    path.chmod(0o755)
    return path


def own_clusters() -> set[Path]:
    """Cluster folders this process owns right now (for tests and leak checks)."""
    me = psutil.Process()
    prefix = f"-{me.pid}-{_ctime_cs(me)}-"
    return {p for p in clusters_root().iterdir() if prefix in p.name and not p.name.startswith("reaping-")}


def owner_alive(name: str) -> bool:
    """True if the folder name's owner (pid + create time) is a live process; unparsable names count as alive."""
    m = NAME_RE.match(name)
    if not m:
        return True
    try:
        proc = psutil.Process(int(m.group("pid")))
        return abs(_ctime_cs(proc) - int(m.group("ctime"))) <= 1 and proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return False


def _postmaster(path: Path) -> psutil.Process | None:
    """The live postmaster whose data dir is ``path/data``, checked by name and cwd (guards against pid reuse)."""
    try:
        pid = int((path / "data" / "postmaster.pid").read_text().split("\n", 1)[0])
        proc = psutil.Process(pid)
        if proc.name() not in ("postgres", "postmaster"):
            return None
        if not proc.cwd().startswith(str(path)):
            return None
        return proc
    except (OSError, ValueError, psutil.Error):
        return None


def _remove_container(path: Path) -> None:
    try:
        cid = (path / CONTAINER_FILE).read_text().strip()
    except OSError:
        return
    try:
        import docker  # noqa: PLC0415 - optional, only when a container was recorded

        docker.from_env(timeout=10).containers.get(cid).remove(force=True, v=True)
    except Exception:  # noqa: BLE001 - gone already, or no engine: nothing more we can do
        pass


def destroy(path: Path) -> None:
    """Kill whatever server ``path`` records and remove the folder. Safe to call twice."""
    proc = _postmaster(path)
    if proc is not None:
        stop_postmaster(proc, path / "data", grace=5.0)
    _remove_container(path)
    shutil.rmtree(path, ignore_errors=True)


def reap_orphans() -> list[str]:
    """Destroy every cluster folder whose owner is dead; return the names reaped."""
    root = clusters_root()
    reaped: list[str] = []
    for entry in sorted(root.iterdir()):
        name = entry.name
        if name.startswith("reaping-"):
            try:
                stale = time.time() - entry.stat().st_mtime > STALE_REAPING_SECONDS
            except OSError:
                continue
            if stale:
                destroy(entry)
            continue
        if not NAME_RE.match(name) or owner_alive(name):
            continue
        claimed = root / f"reaping-{name}"
        try:
            entry.rename(claimed)
        except OSError:
            continue  # another reaper claimed it
        destroy(claimed)
        reaped.append(name)
    return reaped
