"""The template data dir: built once per cache even when several processes start clusters at once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from killpoint.env.postgres.binaries import find_local
from killpoint.env.postgres.template import READY
from tests.helpers import REPO

pytestmark = pytest.mark.skipif(find_local() is None, reason="no Postgres server binaries on this machine")

STARTER = """
from killpoint.env.postgres import provide
with provide("local") as pg:
    print(pg.timings["copy"] >= 0 and pg.dsn)
"""
ROOT = str(REPO)


def test_concurrent_first_starts_build_one_template(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": ROOT, "KILLPOINT_CACHE_DIR": str(cache)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", STARTER],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], results
    assert all(out.startswith("postgresql://") for out, _ in results)
    templates = [p for p in cache.iterdir() if p.is_dir()]
    assert len(templates) == 1 and (templates[0] / READY).exists()
    assert not [p for p in cache.iterdir() if p.name.startswith(".")]  # no staging folders left
