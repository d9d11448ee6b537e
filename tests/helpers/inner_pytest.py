"""A user's test suite run by a real inner pytest (a subprocess), with the killpoint plugin's options."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import pythonpath


def inner_pytest(folder: Path, dsn: str, steps: str, *args: str) -> subprocess.CompletedProcess:
    """Run pytest on `folder` (its own rootdir, cache dir `folder/cache`, run dirs under `folder/runs`) against
    the test database `dsn`, with `steps` as the agent under test; returns the finished process."""
    env = {**os.environ, "PYTHONPATH": pythonpath(), "KILLPOINT_CACHE_DIR": str(folder / "cache")}
    env.pop("PYTEST_XDIST_WORKER", None)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(folder),
           f"--killpoint-dsn={dsn}", f"--killpoint-steps={steps}", f"--killpoint-out={folder / 'runs'}", *args]
    return subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=600)
