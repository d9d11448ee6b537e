"""An initialised data directory per machine, Postgres build and server user, copied for each cluster.

``initdb`` costs ~0.7 s; copying its result costs ~0.1-0.3 s. The template lives in the cache folder
(``$KILLPOINT_CACHE_DIR``, else ``/var/cache/killpoint`` as root so the dropped server user can read it,
else ``$XDG_CACHE_HOME/killpoint`` or ``~/.cache/killpoint``). It is built once, under a file lock, into a
temporary folder that is renamed into place only when complete, so concurrent processes never see half a
template and never build it twice.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from killpoint.errors import EnvironmentProblem
from killpoint.env.postgres.binaries import PgBinaries, RunAs
from killpoint.env.postgres.reaper import new_cluster_dir

READY = ".killpoint-template-ready"
SUPERUSER = "postgres"


def cache_dir() -> Path:
    """Where templates are kept (see module doc). Created if missing."""
    env = os.environ.get("KILLPOINT_CACHE_DIR")
    if env:
        path = Path(env)
    elif os.geteuid() == 0:
        path = Path("/var/cache/killpoint")
    else:
        path = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "killpoint"
    path.mkdir(parents=True, exist_ok=True, mode=0o755)
    return path


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
        build = new_cluster_dir("template")
        staging = cache / f".{key}.{os.getpid()}.tmp"
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
