"""Versioned state: parse a stored payload, refuse what this code cannot read, migrate what it can.

A checkpoint written by older code is brought forward by the step module's ``MIGRATIONS`` (``MIGRATIONS[v]``
turns a version-``v`` state into version ``v + 1``), one version at a time, in order. A checkpoint written by
newer code (a rollback) is refused with :class:`NewerCheckpoint`; a payload that does not parse is refused with
:class:`IncompatibleCheckpoint`. Refusing never writes anything: the caller stops before any step runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .checkpoint import FIELDS, STATUSES, Checkpoint

Migration = Callable[[dict[str, Any]], dict[str, Any]]


class CheckpointRefused(Exception):
    """A stored checkpoint this code will not resume."""

    def __init__(self, run_id: str, message: str) -> None:
        super().__init__(message)
        self.run_id = run_id


class NewerCheckpoint(CheckpointRefused):
    """The checkpoint was written by newer code (its version is above ours): refuse, loudly."""

    def __init__(self, run_id: str, found: int, supported: int) -> None:
        super().__init__(
            run_id,
            f"run {run_id!r}: checkpoint version {found} is newer than this code's STATE_VERSION "
            f"{supported}; refusing to resume (was the code rolled back?)",
        )
        self.found = found
        self.supported = supported


class IncompatibleCheckpoint(CheckpointRefused):
    """The checkpoint payload does not parse, or no migration path leads from its version to ours."""

    def __init__(self, run_id: str, reason: str) -> None:
        super().__init__(run_id, f"run {run_id!r}: cannot read checkpoint: {reason}")
        self.reason = reason


_TYPES: dict[str, tuple[type, ...]] = {
    "run_id": (str,), "seq": (int,), "version": (int,), "cursor": (str,), "status": (str,),
    "state": (dict,), "window": (list,), "cost_usd": (int, float), "updated_at": (str,),
}


def parse(run_id: str, raw: Any) -> Checkpoint:
    """Turn a stored payload into a :class:`Checkpoint`, or raise :class:`IncompatibleCheckpoint`."""
    if not isinstance(raw, dict):
        raise IncompatibleCheckpoint(run_id, f"payload is {type(raw).__name__}, not an object")
    missing = [name for name in FIELDS if name not in raw]
    if missing:
        raise IncompatibleCheckpoint(run_id, f"missing fields {missing}")
    for name, types in _TYPES.items():
        value = raw[name]
        if isinstance(value, bool) or not isinstance(value, types):
            raise IncompatibleCheckpoint(run_id, f"field {name!r} has type {type(value).__name__}")
    if raw["run_id"] != run_id:
        raise IncompatibleCheckpoint(run_id, f"payload belongs to run {raw['run_id']!r}")
    if raw["status"] not in STATUSES:
        raise IncompatibleCheckpoint(run_id, f"unknown status {raw['status']!r}")
    return Checkpoint(**{name: raw[name] for name in FIELDS})


def upgrade(cp: Checkpoint, state_version: int, migrations: Mapping[int, Migration]) -> Checkpoint:
    """Refuse a newer checkpoint; migrate an older one forward to ``state_version``.

    Raises :class:`NewerCheckpoint` when ``cp.version > state_version`` and
    :class:`IncompatibleCheckpoint` when a version on the way has no migration (or is below 1).
    """
    if cp.version > state_version:
        raise NewerCheckpoint(cp.run_id, cp.version, state_version)
    if cp.version < 1:
        raise IncompatibleCheckpoint(cp.run_id, f"version {cp.version} is not a valid version")
    state = cp.state
    for version in range(cp.version, state_version):
        migrate = migrations.get(version)
        if migrate is None:
            raise IncompatibleCheckpoint(
                cp.run_id, f"no migration from version {version} to {version + 1}")
        state = migrate(dict(state))
    return cp.replace(state=state, version=state_version)
