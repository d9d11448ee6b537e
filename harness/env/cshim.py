"""Small C libraries killpoint preloads into workers it cannot reach from Python (`LD_PRELOAD`), built once.

1. `shim_dir()`: where built libraries are kept between sessions: `shims/` in killpoint's cache folder (the
   Postgres template's, `$KILLPOINT_CACHE_DIR` and the rest: harness/env/postgres/template.py), a cache that
   outlives a session on purpose, never a session's temp dir.
2. `build(stem, source)`: the path of `source` compiled into `<stem>-<digest>.so` there (built now if need be,
   with `$CC`, else `cc`, else `gcc`; linked with `-ldl`), or None without a C compiler, when it does not
   compile, or when the cache folder cannot be written. The file appears whole or not at all (built in a
   scratch folder, then renamed), so sessions that build at the same time never load half a library.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile


def shim_dir() -> str:
    """Where built shims are kept between sessions (one file per shim source, named by its digest)."""
    from killpoint.env.postgres.template import cache_path  # noqa: PLC0415 - only when a shim is asked for

    return str(cache_path() / "shims")


def build(stem: str, source: str) -> str | None:
    """The path of `source` built as a shared library (flow step 2), or None if it cannot be built here."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    path = os.path.join(shim_dir(), f"{stem}-{digest}.so")
    if os.path.exists(path):
        return path
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if compiler is None:
        return None
    try:
        os.makedirs(shim_dir(), mode=0o755, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=shim_dir()) as work:
            src, built = os.path.join(work, "shim.c"), os.path.join(work, "shim.so")
            with open(src, "w") as f:
                f.write(source)
            proc = subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", built, src, "-ldl", "-lpthread"],
                                  capture_output=True, timeout=120)
            if proc.returncode != 0:
                return None
            os.replace(built, path)  # atomic: a concurrent session sees the whole file or none
    except (OSError, subprocess.SubprocessError):  # a cache folder it cannot write, a compiler that hangs
        return None
    return path
