"""A child venv that sees the packages of the interpreter running the tests, whether that interpreter is a
system Python or itself a venv.

`python -m venv --system-site-packages` from inside a venv gives the child the BASE interpreter's
packages (sys.base_prefix), not the venv's: killpoint and rich, installed into the venv, go missing. So the
child is a plain venv whose own site-packages holds a .pth file that adds this interpreter's site
directories (`site.getsitepackages()`, in order, and the user site if enabled) with `site.addsitedir`, so
their own .pth files run too (the editable install of killpoint is a .pth file and an import hook).

Lookup order in the child: its own site-packages first (what a test installs there wins), then this
interpreter's site directories in this interpreter's order.

The child has no pip of its own (`--without-pip`, about 0.05 s instead of about 3 s): `python -m pip`
finds this interpreter's pip through the .pth file and installs into the child (pip installs into
sys.prefix, the child). Installing killpoint and its dependencies into the child instead took about 11 s.
"""

from __future__ import annotations

import importlib.util
import site
import subprocess
import sys
from pathlib import Path

PTH_NAME = "_parent_site_packages.pth"


def parent_site_dirs() -> list[str]:
    """This interpreter's site directories, in its lookup order (the venv's before the base's)."""
    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    return [d for d in dirs if Path(d).is_dir()]


def child_site_packages(root: Path) -> Path:
    """The site-packages folder of the venv at `root` (POSIX layout)."""
    return root / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"


def make_child_venv(root: Path, *, pip: bool = False) -> Path:
    """Create a venv at `root` that sees this interpreter's packages after its own; returns its python.

    The venv gets pip of its own (a `bin/pip` for commands that call `pip`, as CI steps do) with `pip`,
    or when this interpreter has none to lend it.
    """
    argv = [sys.executable, "-m", "venv", str(root)]
    if not pip and importlib.util.find_spec("pip") is not None:
        argv.insert(3, "--without-pip")
    subprocess.run(argv, check=True, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    line = f"import site; list(map(site.addsitedir, {parent_site_dirs()!r}))\n"
    (child_site_packages(root) / PTH_NAME).write_text(line)
    return root / "bin" / "python"
