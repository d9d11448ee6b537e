"""Small C libraries killpoint preloads into workers it cannot reach from Python (`LD_PRELOAD`), built once.

1. `shim_dir()`: where built libraries are kept between sessions, one folder per user.
2. `build(stem, source)`: the path of `source` compiled into `<stem>-<digest>.so` there (built now if need be,
   with `$CC`, else `cc`, else `gcc`; linked with `-ldl`), or None without a C compiler or when it does not
   compile. The file appears whole or not at all (built in a scratch folder, then renamed), so sessions that
   build at the same time never load half a library.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile


def shim_dir() -> str:
    """Where built shims are kept between sessions (one file per shim source, named by its digest)."""
    return os.path.join(tempfile.gettempdir(), f"killpoint-{os.getuid()}")


def build(stem: str, source: str) -> str | None:
    """The path of `source` built as a shared library (flow step 2), or None if it cannot be built here."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    path = os.path.join(shim_dir(), f"{stem}-{digest}.so")
    if os.path.exists(path):
        return path
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if compiler is None:
        return None
    os.makedirs(shim_dir(), mode=0o700, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=shim_dir()) as work:
        src, built = os.path.join(work, "shim.c"), os.path.join(work, "shim.so")
        with open(src, "w") as f:
            f.write(source)
        try:
            proc = subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", built, src, "-ldl", "-lpthread"],
                                  capture_output=True, timeout=120)
        except (OSError, subprocess.SubprocessError):
            return None
        if proc.returncode != 0:
            return None
        os.replace(built, path)  # atomic: a concurrent session sees the whole file or none
    return path
