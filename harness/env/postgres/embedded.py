"""``embedded``: the Postgres build that the ``pgserver`` wheel ships (``pip install 'killpoint[embedded]'``).

pgserver's own ``get_server()`` listens on a unix socket only and, as root, adds a system user and widens
the permissions of every parent folder up to ``/``. killpoint therefore uses only its bundled binaries, run
by the same machinery as ``local`` (template copy, 127.0.0.1 on a free port, crash/restart, reaping). As
root the binaries are first copied once into the cache folder, because the ``postgres`` user cannot
reach them under ``/root``.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

from killpoint.env.postgres.binaries import PgBinaries, version_of
from killpoint.env.postgres.template import cache_dir, copy_tree, file_lock

READY = ".killpoint-ready"


def bundled_bindir() -> Path | None:
    """pgserver's ``pginstall/bin`` (found without importing pgserver, which has import-time side effects)."""
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        return None
    bindir = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    return bindir if bindir.is_dir() else None


def _reachable_copy(bindir: Path, version: str) -> Path:
    """As root: a copy of ``pginstall`` and the wheel's vendored ``pgserver.libs`` in the (world-readable)
    cache, laid out as in site-packages so the binaries' RPATH still finds the libraries; else ``bindir``."""
    if os.geteuid() != 0:
        return bindir
    cache = cache_dir()
    final = cache / f"pgserver-{version}"
    inner = Path("pgserver") / "pginstall" / "bin"  # the binaries' RPATH is $ORIGIN/../../../pgserver.libs
    if (final / READY).exists():
        return final / inner
    with file_lock(cache / f"pgserver-{version}.lock"):
        if not (final / READY).exists():
            staging = cache / f".pgserver-{version}.{os.getpid()}.tmp"
            shutil.rmtree(staging, ignore_errors=True)
            try:
                (staging / "pgserver").mkdir(parents=True)
                copy_tree(bindir.parent, staging / "pgserver" / "pginstall")
                libs = bindir.parent.parent.parent / "pgserver.libs"
                if libs.is_dir():
                    copy_tree(libs, staging / "pgserver.libs")
                for path in [staging, *staging.rglob("*")]:
                    if not path.is_symlink():
                        path.chmod(
                            path.stat().st_mode
                            | (0o555 if path.is_dir() or os.access(path, os.X_OK) else 0o444)
                        )
                (staging / READY).write_text(str(bindir))
                shutil.rmtree(final, ignore_errors=True)
                staging.rename(final)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    return final / inner


def probe() -> str | None:
    """``None`` if pgserver's binaries are installed and run; otherwise why not."""
    bindir = bundled_bindir()
    if bindir is None:
        return "pgserver is not installed (pip install 'killpoint[embedded]')"
    if version_of(bindir) is None:
        return f"pgserver's postgres at {bindir} does not run on this machine"
    return None


def find() -> PgBinaries:
    """The embedded binaries, usable by the server user. Call only after ``probe()`` returned ``None``."""
    bindir = bundled_bindir()
    assert bindir is not None
    version = version_of(bindir)
    assert version is not None
    return PgBinaries(bindir=_reachable_copy(bindir, version), version=version, source="pgserver")
