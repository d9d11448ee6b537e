"""Find Postgres server binaries (``initdb`` + ``postgres``) on this machine, and the user to run them as.

Search order: ``postgres`` on PATH, ``pg_config --bindir``, then ``/usr/lib/postgresql/*/bin`` (newest
first). A directory counts only if it holds both ``initdb`` and ``postgres`` and ``postgres --version``
runs. Results are cached per process.
"""

from __future__ import annotations

import functools
import glob
import os
import pwd
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PgBinaries:
    """A usable server installation: ``bindir`` holds ``initdb`` and ``postgres``; ``version`` like ``15.18``."""

    bindir: Path
    version: str
    source: str  # how it was found: "PATH", "pg_config", "/usr/lib/postgresql", "pgserver"

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    def exe(self, name: str) -> str:
        return str(self.bindir / name)


@dataclass(frozen=True)
class RunAs:
    """The OS user a server runs as. ``uid is None`` means "as the current user" (not root)."""

    name: str
    uid: int | None = None
    gid: int | None = None

    def popen_kwargs(self) -> dict[str, object]:
        """Keyword arguments for ``subprocess.Popen``/``run`` that drop to this user (empty if not root)."""
        if self.uid is None:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": []}

    def chown(self, path: Path) -> None:
        if self.uid is not None:
            os.chown(path, self.uid, self.gid if self.gid is not None else -1)


@functools.cache
def run_as() -> RunAs:
    """As root: the ``postgres`` user where it exists, else ``nobody`` (initdb refuses root). Else: ourselves."""
    if os.geteuid() != 0:
        return RunAs(name=pwd.getpwuid(os.geteuid()).pw_name)
    for name in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return RunAs(name=name, uid=entry.pw_uid, gid=entry.pw_gid)
    return RunAs(name="root")  # initdb will refuse; the error names the missing user


def version_of(bindir: Path) -> str | None:
    """``postgres --version`` of ``bindir`` as ``15.18``, or ``None`` if it does not run."""
    exe = bindir / "postgres"
    if not (exe.is_file() and (bindir / "initdb").is_file()):
        return None
    try:
        out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"(\d+(?:\.\d+)?)", out)
    return match.group(1) if match else None


def _candidates() -> list[tuple[Path, str]]:
    found: list[tuple[Path, str]] = []
    on_path = shutil.which("postgres")
    if on_path:
        found.append((Path(on_path).resolve().parent, "PATH"))
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=10
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            out = ""
        if out:
            found.append((Path(out), "pg_config"))

    def _major(path: str) -> int:
        m = re.search(r"/(\d+)/bin$", path)
        return int(m.group(1)) if m else 0

    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_major, reverse=True):
        found.append((Path(d), "/usr/lib/postgresql"))
    return found


@functools.cache
def find_local() -> PgBinaries | None:
    """The first usable installation in search order, or ``None``."""
    seen: set[Path] = set()
    for bindir, source in _candidates():
        if bindir in seen:
            continue
        seen.add(bindir)
        version = version_of(bindir)
        if version:
            return PgBinaries(bindir=bindir, version=version, source=source)
    return None
