"""Cluster folders with an owner, and the reaper that removes those whose owner died.

Every owned server (local, embedded, docker) lives in a folder ``<root>/<kind>-<pid>-<ctime>-<rand>`` named
after the owning process: its pid and its create time (so a recycled pid is not taken for the owner).
``reap_orphans()`` runs at every ``provide()``: for each folder whose owner is gone it kills the server
recorded there (the postmaster from ``data/postmaster.pid``, a container id in ``container``), then removes
the folder. A folder is claimed by renaming it first, so two reapers never fight over one.

The owner is alive while it holds an exclusive ``flock`` on its folder, taken before the folder gets its name
(it is made as ``new-<name>``, locked, then renamed) and released by the kernel when the owner dies. A pid
proves nothing to a reaper in another PID namespace (a container sharing ``/tmp``, ``unshare -p``), where
the owner's pid is invisible or another process's; a lock on the folder is seen by both. So a folder is dead
only when its lock is free *and* its pid is not a live process here (folders of an older killpoint carry no
lock). A ``new-`` folder whose maker died before renaming it is removed once it is free and older than
``STALE_REAPING_SECONDS``.

The reaper removes only what it can prove is its own:

- The root is per user: ``$KILLPOINT_PG_ROOT``, else ``/dev/shm/killpoint-pg-<uid>`` where ``/dev/shm`` is a
  memory file system with room (``memory_dir``), else ``<tmp>/killpoint-pg-<uid>``. It must be a real
  directory (not a symlink) owned by this user and writable by nobody else; anything else is refused with an
  error, never used. Its mode is 0700, or 0711 as root: the server then runs as an unprivileged user
  (``postgres``) that must traverse it to reach its data dir, but may not list or change it. Since only this
  user can create entries in the root, an entry there is one of ours.
- A folder is acted on only if it is a real directory (not a symlink) owned by this user, or, as root, by the
  server user the ``local`` provider hands its cluster folder to, and its owner process is dead.
- A container is removed only if the id in ``container`` is a full Docker id and the engine reports
  killpoint's labels on it with the folder's session (``killpoint.session=<pid>-<ctime>`` of the owner) and
  the folder's name: a planted or edited ``container`` file never names a container the reaper will touch.
  If the engine cannot be asked, the folder is kept (claimed) for a later reaper to retry.
- Staging folders a template builder left in the cache folder when it died are removed too (see
  ``template.reap_staging``).
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from killpoint.env.postgres.binaries import run_as
from killpoint.env.postgres.process import stop_postmaster
from killpoint.errors import EnvironmentProblem

NAME_RE = re.compile(r"^(?P<kind>[a-z]+)-(?P<pid>\d+)-(?P<ctime>\d+)-[^/]+$")
CONTAINER_FILE = "container"
CONTAINER_ID_RE = re.compile(r"^[0-9a-f]{64}$")
CLAIM_PREFIX = "reaping-"
STAGING_PREFIX = "new-"
STALE_REAPING_SECONDS = 60.0
ROOT_MAX = 51
"""The longest root whose servers' unix sockets fit a socket path (107 bytes): a folder name
(``/embedded-<pid>-<ctime>-<rand>``) and ``/.s.PGSQL.<port>`` take up to 56 bytes under it."""
LABEL = "killpoint"
LABEL_VALUE = "postgres"
SESSION_LABEL = "killpoint.session"
CLUSTER_LABEL = "killpoint.cluster"


def root_mode() -> int:
    """0711 as root (the server user must traverse the root to its data dir), else 0700."""
    return 0o711 if os.geteuid() == 0 else 0o700


MEMORY_DIR = Path("/dev/shm")
MEMORY_ROOM = 1 << 30
"""What ``memory_dir`` asks of the memory file system, free in it and in the machine's available memory: a
cluster is ~40 MB and grows by its WAL, and several sessions (``-j``, shards, test workers) may share it."""
MEMORY_VAR = "KILLPOINT_PG_IN_MEMORY"
MEMORY_FS = "tmpfs"
"""The file system `memory_dir` asks `/dev/shm` to be (its type in `/proc/self/mounts`)."""


def memory_dir() -> Path | None:
    """``MEMORY_DIR`` when the clusters may live there, else ``None`` (then they go under the temp folder).

    Why: a cluster is ~1,000 files. On a disk file system each file's creation costs a journalled inode
    (~0.4 ms here), so copying the template and creating the run database cost ~1 CPU-second of every
    session's start; in memory ~0.1 s. A process crash keeps a memory file system's pages as it keeps the
    page cache, so what a db-crash tests is the same (the server runs with fsync off either way).

    Taken only when it is a ``tmpfs`` mount this user may write in, with ``MEMORY_ROOM`` free there and in
    the machine's available memory (a container's default 64 MB ``/dev/shm`` is passed over), and not turned
    off with ``KILLPOINT_PG_IN_MEMORY=0``."""
    if os.environ.get(MEMORY_VAR, "").strip().lower() in ("0", "no", "false", "off"):
        return None
    if _mount_type(MEMORY_DIR) != MEMORY_FS or not os.access(MEMORY_DIR, os.W_OK | os.X_OK):
        return None
    try:
        vfs = os.statvfs(MEMORY_DIR)
    except OSError:
        return None
    if vfs.f_bavail * vfs.f_frsize < MEMORY_ROOM or _available_memory() < MEMORY_ROOM:
        return None
    return MEMORY_DIR


def _mount_type(path: Path) -> str | None:
    """The file system type of the mount exactly at ``path`` (``/proc/self/mounts``), or ``None``."""
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    found = None
    for line in lines:  # the last mount at a point is the one seen
        fields = line.split()
        if len(fields) >= 3 and fields[1] == str(path):
            found = fields[2]
    return found


def _available_memory() -> int:
    """``MemAvailable`` in bytes (0 if it cannot be read)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _root_name() -> str:
    """The per-user root's name, in whichever folder holds it: ``killpoint-pg-<uid>``."""
    return f"killpoint-pg-{os.geteuid()}"


def _memory_root() -> Path:
    """``/dev/shm/killpoint-pg-<uid>``."""
    return MEMORY_DIR / _root_name()


def _tmp_root() -> Path:
    """``<tmp>/killpoint-pg-<uid>``, or ``/tmp/killpoint-pg-<uid>`` when that is too long for its sockets."""
    root = Path(tempfile.gettempdir()) / _root_name()
    if len(os.fsencode(root)) > ROOT_MAX:  # a long TMPDIR: the sockets go where their paths fit
        root = Path("/tmp") / _root_name()
    return root


def in_memory_root(root: Path) -> bool:
    """True when ``root`` is the memory root the default chose (not a ``KILLPOINT_PG_ROOT``)."""
    return not os.environ.get("KILLPOINT_PG_ROOT") and root == _memory_root()


def root_path() -> Path:
    """Where ``clusters_root()`` is (not made or checked here): ``$KILLPOINT_PG_ROOT``, else
    ``/dev/shm/killpoint-pg-<uid>`` where ``memory_dir()`` allows, else ``<tmp>/killpoint-pg-<uid>``, else,
    when that is too long for the sockets in it, ``/tmp/killpoint-pg-<uid>``."""
    env = os.environ.get("KILLPOINT_PG_ROOT")
    if env:
        return Path(env)
    return _memory_root() if memory_dir() is not None else _tmp_root()


def default_roots() -> list[Path]:
    """Every root a session of this user may have used when ``KILLPOINT_PG_ROOT`` is unset (memory, temp
    folder), which the reaper looks through: whether ``/dev/shm`` had room was decided per session."""
    return [_memory_root(), _tmp_root()]


def clusters_root(root: Path | None = None) -> Path:
    """``root`` (default ``root_path()``: ``$KILLPOINT_PG_ROOT``, memory, or ``<tmp>/killpoint-pg-<uid>``):
    created private (``root_mode()``), or checked to be a real directory of this user that nobody else may
    write (then its mode is set); else refused. Where ``<tmp>`` (``TMPDIR``) is too long for the unix sockets
    of the servers and of the kill-point barrier (``ROOT_MAX``), the root is ``/tmp/killpoint-pg-<uid>``; a
    ``KILLPOINT_PG_ROOT`` that long is refused by ``new_cluster_dir`` (reaping it needs no socket)."""
    env = os.environ.get("KILLPOINT_PG_ROOT")
    root = root or root_path()
    mode = root_mode()
    try:
        if env:
            root.parent.mkdir(parents=True, exist_ok=True)
        os.mkdir(root, mode)
    except FileExistsError:
        pass
    except OSError as exc:
        where = "KILLPOINT_PG_ROOT" if env else "TMPDIR"
        raise EnvironmentProblem(
            "cluster-root-unusable", f"cannot make the Postgres cluster folder {root} ({exc.strerror})",
            f"set {where} to a short folder this user can write (or KILLPOINT_PG_ROOT){_or_disk(root)}, "
            "then run again") from None
    problem = _unsafe(root)
    if problem:
        raise EnvironmentProblem(
            "cluster-root-unsafe",
            f"the Postgres cluster folder {root} {problem}; killpoint keeps its servers only in a folder "
            "that no other user can change",
            f"remove {root}, or set KILLPOINT_PG_ROOT to a private folder of this user{_or_disk(root)}, then run "
            "again",
        )
    if stat.S_IMODE(os.lstat(root).st_mode) != mode:
        os.chmod(root, mode)
    return root


def _or_disk(root: Path) -> str:
    """For a fix's text: how to keep clusters off the memory file system, when ``root`` is on it."""
    return f", or {MEMORY_VAR}=0 to keep them in the temp folder" if in_memory_root(root) else ""


def _unsafe(root: Path) -> str | None:
    """Why ``root`` may not hold clusters (not a real directory, another user's, writable by others), or
    ``None``."""
    try:
        st = os.lstat(root)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory (a symlink or a file)"
    if st.st_uid != os.geteuid():
        return f"belongs to uid {st.st_uid}, not to this user (uid {os.geteuid()})"
    if st.st_mode & 0o022:
        return f"can be written by other users (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def reapable_roots() -> list[Path]:
    """``clusters_root()``, and without ``KILLPOINT_PG_ROOT`` the other default root too where it exists and is
    safe (``_unsafe``): a session that found ``/dev/shm`` full used the temp folder, and the next may not."""
    roots = [clusters_root()]
    if not os.environ.get("KILLPOINT_PG_ROOT"):
        roots += [r for r in default_roots() if r != roots[0] and os.path.lexists(r) and _unsafe(r) is None]
    return roots


def _ctime_cs(proc: psutil.Process) -> int:
    return int(round(proc.create_time() * 100))


def session_id(proc: psutil.Process | None = None) -> str:
    """``<pid>-<ctime>`` of ``proc`` (default: this process): what folder names and container labels carry."""
    proc = proc or psutil.Process()
    return f"{proc.pid}-{_ctime_cs(proc)}"


def folder_session(name: str) -> str | None:
    """The owner's session id from a folder name (claimed or not), or ``None`` if it is not one of ours."""
    m = NAME_RE.match(name.removeprefix(CLAIM_PREFIX).removeprefix(STAGING_PREFIX))
    return f"{m.group('pid')}-{m.group('ctime')}" if m else None


def container_labels(folder: Path) -> dict[str, str]:
    """The labels the docker provider puts on the container it starts for ``folder``."""
    session = folder_session(folder.name)
    assert session is not None, folder
    return {LABEL: LABEL_VALUE, SESSION_LABEL: session, CLUSTER_LABEL: folder.name.removeprefix(CLAIM_PREFIX)}


def new_cluster_dir(kind: str) -> Path:
    """A fresh folder owned by this process (name carries pid + create time), mode ``root_mode()``; refused in
    one line under a root too long for the unix sockets made in it (``ROOT_MAX``)."""
    root = root_path()
    if len(os.fsencode(root)) > ROOT_MAX:  # refused before the root is made: nothing is left behind
        raise EnvironmentProblem(
            "socket-path-too-long", f"KILLPOINT_PG_ROOT={root} is {len(os.fsencode(root))} bytes long: the unix "
            "sockets of the servers and of the kill-point barrier under it would not fit the 107 bytes a socket "
            "path may have", f"set KILLPOINT_PG_ROOT to a folder of at most {ROOT_MAX} bytes (or unset it)")
    root = clusters_root(root)
    staging = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{kind}-{session_id()}-", dir=root))
    staging.chmod(root_mode())
    fd = _try_lock(staging)
    assert fd is not None, staging  # nobody else knows the folder yet
    path = root / staging.name.removeprefix(STAGING_PREFIX)
    try:
        staging.rename(path)
    except BaseException:
        os.close(fd)
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _held[str(path)] = fd
    return path


_held: dict[str, int] = {}
"""The folders this process owns: path -> the descriptor holding its ``flock`` (see the module doc)."""


def _try_lock(path: Path) -> int | None:
    """A descriptor holding an exclusive ``flock`` on the directory ``path``, or ``None`` if another open
    file holds it (its owner lives) or it cannot be opened. Not inherited by exec'd children."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def release(path: Path) -> None:
    """Let go of the lock on a folder of this process (after removing it); no-op for any other."""
    fd = _held.pop(str(path), None)
    if fd is not None:
        os.close(fd)


def own_clusters() -> set[Path]:
    """Cluster folders this process owns right now (for tests and leak checks)."""
    prefix = f"-{session_id()}-"
    return {p for root in reapable_roots() for p in root.iterdir() if prefix in p.name
            and not p.name.startswith((CLAIM_PREFIX, STAGING_PREFIX))}


def folder_alive(path: Path) -> bool:
    """True if the owner of folder ``path`` is alive: it holds the folder's lock, or (a folder of an older
    killpoint) its pid is a live process here."""
    fd = _try_lock(path)
    if fd is None:
        return True
    os.close(fd)
    return owner_alive(path.name)


def owner_alive(name: str) -> bool:
    """True if the folder name's owner (pid + create time) is a live process; unparsable names count as alive."""
    m = NAME_RE.match(name)
    return session_alive(int(m.group("pid")), int(m.group("ctime"))) if m else True


def session_alive(pid: int, ctime: int | None) -> bool:
    """True if ``pid`` is a live process created at ``ctime`` (centiseconds; ``None``: any time)."""
    try:
        proc = psutil.Process(pid)
        if ctime is not None and abs(_ctime_cs(proc) - ctime) > 1:
            return False
        return proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return False


def trusted_uids() -> set[int]:
    """Who may own a folder the reaper acts on: this user, and as root the server user ``local`` hands its
    cluster folder to (only this user can create entries in the root, so such a folder was made here)."""
    uids = {os.geteuid()}
    server = run_as()
    if os.geteuid() == 0 and server.uid is not None:
        uids.add(server.uid)
    return uids


def is_own_folder(path: Path) -> bool:
    """A real directory (not a symlink) owned by a ``trusted_uids()`` user, named like our folders."""
    if folder_session(path.name) is None:
        return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid in trusted_uids()


def _postmaster(path: Path) -> psutil.Process | None:
    """The live postmaster whose data dir is ``path/data``, checked by name and cwd (guards against pid reuse)."""
    try:
        pid = int((path / "data" / "postmaster.pid").read_text().split("\n", 1)[0])
        proc = psutil.Process(pid)
        if proc.name() not in ("postgres", "postmaster"):
            return None
        if not proc.cwd().startswith(str(path) + os.sep):
            return None
        return proc
    except (OSError, ValueError, psutil.Error):
        return None


def _read_container_id(path: Path) -> str | None:
    """The id in ``path/container`` if it is a plain file holding a full Docker id; else ``None``."""
    try:
        fd = os.open(path / CONTAINER_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        text = os.read(fd, 256).decode("ascii", errors="replace").strip()
    finally:
        os.close(fd)
    return text if CONTAINER_ID_RE.match(text) else None


def docker_client() -> Any:
    """A client of the Docker engine (``DOCKER_HOST`` or the default socket); raises if there is none."""
    import docker  # noqa: PLC0415 - optional, only when a container was recorded

    return docker.from_env(timeout=10)


def _remove_container(path: Path) -> bool:
    """Remove the container ``path`` records if the engine proves it ours (labels: killpoint's, the folder's
    session and name). True when nothing is left to do; False if the engine could not be asked (keep the
    folder: the container may still run)."""
    if not (path / CONTAINER_FILE).exists() and not (path / CONTAINER_FILE).is_symlink():
        return True
    cid = _read_container_id(path)
    if cid is None:
        return True  # not an id we wrote: refused before any call to the engine
    want = container_labels(path)
    try:
        client = docker_client()
    except Exception:  # noqa: BLE001 - no engine now; a later reaper retries
        return False
    try:
        try:
            container = client.containers.get(cid)
        except Exception as exc:  # noqa: BLE001
            return type(exc).__name__ == "NotFound"  # gone already: done; engine trouble: retry later
        labels = dict(getattr(container, "labels", None) or {})
        if getattr(container, "id", None) != cid or any(labels.get(k) != v for k, v in want.items()):
            return True  # not ours: never touched
        try:
            container.remove(force=True, v=True)
        except Exception as exc:  # noqa: BLE001
            return type(exc).__name__ == "NotFound"
        return True
    finally:
        close = getattr(client, "close", None)
        if close is not None:
            close()


def destroy(path: Path) -> bool:
    """Kill whatever server ``path`` records and remove the folder (and let go of its lock, if it is this
    process's). Safe to call twice. False (folder kept) if a recorded container could not be checked with
    the engine."""
    proc = _postmaster(path)
    if proc is not None:
        stop_postmaster(proc, path / "data", grace=5.0)
    if not _remove_container(path):
        return False
    shutil.rmtree(path, ignore_errors=True)
    release(path)
    return True


def reap_orphans(roots: list[Path] | None = None) -> list[str]:
    """Destroy every cluster folder of ours whose owner is dead, and the staging folders of dead template
    builders, in `roots` (the default ones, `reapable_roots`, unless given); return the names of the cluster
    folders reaped."""
    reaped: list[str] = []
    for root in reapable_roots() if roots is None else roots:
        reaped += _reap_root(root)
    return reaped


def _reap_root(root: Path) -> list[str]:
    """``reap_orphans`` in one root."""
    reaped: list[str] = []
    for entry in sorted(root.iterdir()):
        name = entry.name
        if not is_own_folder(entry):
            continue
        if name.startswith((CLAIM_PREFIX, STAGING_PREFIX)):
            if _stale(entry) and not (name.startswith(STAGING_PREFIX) and folder_alive(entry)):
                destroy(entry)
            continue
        fd = _try_lock(entry)
        if fd is None:
            continue  # its owner holds it: alive, whatever its pid says here
        try:
            if owner_alive(name):
                continue
            claimed = root / f"{CLAIM_PREFIX}{name}"
            try:
                entry.rename(claimed)
            except OSError:
                continue  # another reaper claimed it
            if destroy(claimed):
                reaped.append(name)
        finally:
            os.close(fd)
    return reaped


def _stale(entry: Path) -> bool:
    """True if ``entry`` was last changed more than ``STALE_REAPING_SECONDS`` ago."""
    try:
        return time.time() - os.lstat(entry).st_mtime > STALE_REAPING_SECONDS
    except OSError:
        return False
