"""An initialised data directory per machine, Postgres build and server user, copied for each cluster.

``initdb`` costs ~0.7 s; copying its result costs ~0.1-0.3 s. The template lives in the cache folder
(``$KILLPOINT_CACHE_DIR``, else ``/var/cache/killpoint`` as root so the dropped server user can read it,
else ``$XDG_CACHE_HOME/killpoint`` or ``~/.cache/killpoint``). It is built once, under a file lock, into a
temporary folder that is renamed into place only when complete, so concurrent processes never see half a
template and never build it twice.

The temporary folder is ``.<key>.<pid>-<ctime>.tmp`` in the cache folder, named after the builder like the
cluster folders (see ``reaper``): if the builder is killed mid-build (about 40 MB left behind),
``reap_staging()`` removes it once the builder is dead: at the next template build, and at every
``reap_orphans()``. The builder is alive while it holds the key's build lock (``<key>.lock``), which a
reaper in another PID namespace sees as well as this one (a pid it may not). The initdb itself runs in a cluster folder, which the reaper removes like any other.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from killpoint.env.postgres.binaries import PgBinaries, RunAs
from killpoint.env.postgres.reaper import new_cluster_dir, session_alive, session_id
from killpoint.errors import EnvironmentProblem

READY = ".killpoint-template-ready"
SUPERUSER = "postgres"
STAGING_RE = re.compile(r"^\.(?P<key>.+)\.(?P<pid>\d+)(?:-(?P<ctime>\d+))?\.tmp$")
"""``.<key>.<pid>-<ctime>.tmp``; also the older ``.<key>.<pid>.tmp`` (builder told by pid alone)."""


def cache_path() -> Path:
    """Where templates are kept (see module doc), whether or not it exists yet."""
    env = os.environ.get("KILLPOINT_CACHE_DIR")
    if env:
        return Path(env)
    if os.geteuid() == 0:
        return Path("/var/cache/killpoint")
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "killpoint"


def cache_dir() -> Path:
    """``cache_path()``, created if missing."""
    path = cache_path()
    path.mkdir(parents=True, exist_ok=True, mode=0o755)
    return path


def staging_name(key: str) -> str:
    """The temporary folder this process builds template ``key`` in (see module doc)."""
    return f".{key}.{session_id()}.tmp"


def reap_staging(cache: Path | None = None, key: str | None = None) -> list[str]:
    """Remove the staging folders in ``cache`` (default ``cache_path()``) whose builder is dead, and that
    this user owns (real directories, not symlinks); with ``key``, every staging folder of that key (call
    it only under the key's build lock: no live builder can be using one then). A builder is dead when its
    key's build lock is free (the reaper holds it while removing) and its pid is not alive here. Returns the names removed."""
    cache = cache_path() if cache is None else cache
    removed: list[str] = []
    try:
        entries = list(os.scandir(cache))
    except OSError:
        return removed
    for entry in entries:
        m = STAGING_RE.match(entry.name)
        if not m:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            continue
        ctime = m.group("ctime")
        with contextlib.ExitStack() as held:
            if m.group("key") != key:
                if not held.enter_context(try_file_lock(cache / f"{m.group('key')}.lock")):
                    continue  # its builder is at work, seen from here or not
                if session_alive(int(m.group("pid")), None if ctime is None else int(ctime)):
                    continue
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.name)
    return removed


@contextmanager
def try_file_lock(path: Path) -> Iterator[bool]:
    """Yields True while holding an exclusive ``flock`` on ``path`` taken without waiting; False (nothing
    held) if another process holds it or ``path`` cannot be opened. Never creates ``path``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        yield not path.exists() and not path.is_symlink()  # no lock file: no build of that key was ever locked
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path``, held for the ``with`` block (released if the process dies)."""
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def copy_tree(src: Path, dst: Path) -> None:
    """Copy ``src`` to a new ``dst`` keeping modes and (as root) owners: ``cp -a``, else ``shutil.copytree``."""
    cp = shutil.which("cp")
    if cp:
        subprocess.run([cp, "-a", str(src), str(dst)], check=True, capture_output=True)
    else:
        shutil.copytree(src, dst, symlinks=True)


def initdb(bins: PgBinaries, user: RunAs, data: Path, log: Path) -> None:
    """Run ``initdb`` (trust auth, UTF8, C locale, no fsync) into the empty folder ``data`` as ``user``."""
    data.mkdir(mode=0o700)
    user.chown(data)
    cmd = [
        bins.exe("initdb"),
        "-D",
        str(data),
        "-U",
        SUPERUSER,
        "-A",
        "trust",
        "-E",
        "UTF8",
        "--locale=C",
        "--no-sync",
    ]
    with open(log, "ab") as out:
        proc = subprocess.run(
            cmd, stdout=out, stderr=subprocess.STDOUT, cwd="/", timeout=300, **user.popen_kwargs()
        )  # type: ignore[call-overload]
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-3:]
        raise EnvironmentProblem(
            "initdb-failed",
            f"initdb from {bins.bindir} failed as user {user.name} (exit {proc.returncode}): {' | '.join(tail)}",
            "check that the Postgres installation is complete and that this user can write to the temp folder",
        )


def template_key(bins: PgBinaries, user: RunAs) -> str:
    digest = hashlib.sha256(str(bins.bindir).encode()).hexdigest()[:8]
    return f"pg-template-{bins.version}-{digest}-{user.name}"


def ensure_template(bins: PgBinaries, user: RunAs) -> Path | None:
    """The template's data dir for this build and user, built now if missing; ``None`` if the cache folder
    cannot be used (the caller then runs initdb per cluster). A failing ``initdb`` raises."""
    try:
        return _ensure_template(cache_dir(), bins, user)
    except OSError:
        return None


def _ensure_template(cache: Path, bins: PgBinaries, user: RunAs) -> Path:
    key = template_key(bins, user)
    final = cache / key
    if (final / READY).exists():
        return final / "data"
    with file_lock(cache / f"{key}.lock"):
        if (final / READY).exists():
            return final / "data"
        reap_staging(cache, key)  # the lock is ours: any staging folder of this key is a dead builder's
        build = new_cluster_dir("template")
        staging = cache / staging_name(key)
        try:
            initdb(bins, user, build / "data", build / "initdb.log")
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir(mode=0o755)
            copy_tree(build / "data", staging / "data")
            (staging / READY).write_text(f"{bins.bindir}\n")
            shutil.rmtree(final, ignore_errors=True)
            staging.rename(final)
        finally:
            shutil.rmtree(build, ignore_errors=True)
            shutil.rmtree(staging, ignore_errors=True)
    return final / "data"
