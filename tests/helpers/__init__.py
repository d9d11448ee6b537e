"""Helpers shared by the test folders: ``agents`` (worker subprocesses, a kill-point server, polling),
``harness`` (a harness Session on the test Postgres), ``scenarios`` (run a scenario as `killpoint run` does),
``sandbox`` (the CLI as a subprocess in a sandbox of its own) and ``checks`` (shared assertions)."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
"""The repository root: the folder the CLI and workers import `tests.gallery.*` step modules from."""


def pythonpath() -> str:
    """PYTHONPATH with the repository first: harness subprocesses (fork server, workers, the CLI) import the
    gallery's step modules by their dotted path, `tests.gallery.<kind>.<name>`, from any working directory."""
    parts = [str(REPO)]
    if os.environ.get("PYTHONPATH"):
        parts.append(os.environ["PYTHONPATH"])
    return os.pathsep.join(parts)
