"""The checkpoint store: checkpoints of the agent's earlier versions kept under `.killpoint/checkpoints/`, as
fixtures that the `stored-checkpoints` scenario resumes under the current code (like the failure store,
`run.store`, beside it).

1. `record(store, session)`, at the end of `killpoint run`: for each step of the crash-free run, one run of
   the current code stopped there for good (one incarnation): `kill` at the first step's start (the run's
   seq-0 checkpoint, cursor at that step), `term` at each other step's start but the last (it drains and
   pauses at the next step's cursor). Each run's checkpoints row is kept as it was stored (seq, status,
   data), one per cursor, with the module, its STATE_VERSION and digest (`AgentSpec.digest`). A digest
   already kept is not recorded again (its files are touched: it is recent). A black-box worker, or an
   adapter's table, records nothing: the rows are the reference runtime's (`checkpoints` table).
2. One small JSON file per checkpoint, named `<module>-v<version>-<digest>-<NN>-<cursor>.json` (NN: the
   cursor's place in the run), so names sort by module, version, digest and run order; at most
   `MAX_PER_DIGEST` per digest and the `MAX_DIGESTS` most recently recorded digests per module (the current
   one always among them): the folder does not grow without bound.
3. `older(agent)`: the kept checkpoints of the same module from another digest at the same or an older
   STATE_VERSION, sorted by name: what the current code must resume. Each has a `seed` (from its name):
   the trial that resumes it is `killpoint replay --scenario stored-checkpoints --seed N` while it is kept.
4. Files are written atomically (a temporary file renamed); an unreadable one is ignored, and so is
   anything but a regular file of bounded size (`bounded.read_bounded`: a FIFO or `/dev/zero` planted there is
   never read). `--no-store` (a store of None) turns all of it off.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from killpoint.env.stepmodule import AgentSpec
from killpoint.faults.schedule import Fault, Schedule
from killpoint.run.bounded import read_bounded

if TYPE_CHECKING:
    from killpoint.run.trial import Session

DEFAULT_ROOT = Path(".killpoint") / "checkpoints"
MAX_PER_DIGEST = 8
"""Checkpoints kept per (module, version, digest): the first cursors of the run."""
MAX_DIGESTS = 3
"""Digests (versions of the module's source) kept per module: the most recently recorded."""
TERMINAL = ("done", "failed")


@dataclass(frozen=True)
class StoredCheckpoint:
    """One kept checkpoint: where it came from, and its row as the runtime stored it."""

    name: str
    module: str
    state_version: int
    digest: str
    cursor: str
    stopped_by: str
    seq: int
    status: str
    data: Any

    @property
    def seed(self) -> int:
        """The number naming this checkpoint's trial (`replay --seed`): from its file name, so it stays the
        same whatever else is kept."""
        return int(hashlib.sha256(self.name.encode()).hexdigest()[:8], 16)

    def to_json(self) -> dict[str, Any]:
        return {"module": self.module, "state_version": self.state_version, "digest": self.digest,
                "cursor": self.cursor, "stopped_by": self.stopped_by,
                "row": {"seq": self.seq, "status": self.status, "data": self.data}}

    @classmethod
    def from_json(cls, name: str, raw: Any) -> StoredCheckpoint | None:
        """The checkpoint a file holds, or None when it is not one of ours."""
        try:
            row = raw["row"]
            return cls(name, str(raw["module"]), int(raw["state_version"]), str(raw["digest"]), str(raw["cursor"]),
                       str(raw.get("stopped_by") or ""), int(row["seq"]), str(row["status"]), row["data"])
        except (KeyError, TypeError, ValueError):
            return None


def file_name(agent: AgentSpec, index: int, cursor: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", cursor)
    return f"{agent.module}-v{agent.state_version}-{agent.digest}-{index:02d}-{safe}.json"


class CheckpointStore:
    """Kept checkpoints of every module, in `root` (flow above)."""

    def __init__(self, root: Path = DEFAULT_ROOT) -> None:
        self.root = root

    def all(self) -> list[StoredCheckpoint]:
        """Every readable kept checkpoint, sorted by file name."""
        if not self.root.is_dir():
            return []
        out = []
        for path in sorted(self.root.glob("*.json")):
            if path.name.startswith("."):
                continue  # a temporary file of a write that never finished
            raw = read_bounded(path)
            try:
                found = None if raw is None else StoredCheckpoint.from_json(path.name, json.loads(raw))
            except ValueError:
                continue
            if found is not None:
                out.append(found)
        return out

    def of(self, agent: AgentSpec) -> list[StoredCheckpoint]:
        """The kept checkpoints of this very version of the module (its digest)."""
        return [c for c in self.all() if c.module == agent.module and c.digest == agent.digest]

    def older(self, agent: AgentSpec) -> list[StoredCheckpoint]:
        """Flow step 3: kept by another digest of the module, at the same or an older STATE_VERSION."""
        return [c for c in self.all() if c.module == agent.module and c.digest != agent.digest
                and c.state_version <= agent.state_version]

    def touch(self, agent: AgentSpec) -> None:
        """Mark the digest's files as just recorded (it is kept among the most recent)."""
        for c in self.of(agent):
            os.utime(self.root / c.name)

    def write(self, agent: AgentSpec, checkpoints: list[StoredCheckpoint]) -> list[Path]:
        """Keep `checkpoints` (of `agent`'s digest) in place of the digest's earlier ones, then drop the
        oldest digests of the module beyond `MAX_DIGESTS` (flow step 2); the paths written."""
        self.root.mkdir(parents=True, exist_ok=True)
        written = []
        for c in checkpoints[:MAX_PER_DIGEST]:
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".checkpoint-", suffix=".json")
            with os.fdopen(fd, "w") as f:
                json.dump(c.to_json(), f, indent=1, sort_keys=True)
            os.replace(tmp, self.root / c.name)
            written.append(self.root / c.name)
        for c in self.of(agent):
            if self.root / c.name not in written:
                (self.root / c.name).unlink(missing_ok=True)
        self.prune(agent.module)
        return written

    def prune(self, module: str) -> None:
        """Keep the `MAX_DIGESTS` most recently recorded digests of `module`."""
        newest: dict[str, float] = {}
        for c in self.all():
            if c.module == module:
                newest[c.digest] = max(newest.get(c.digest, 0.0), (self.root / c.name).stat().st_mtime)
        old = sorted(newest, key=lambda d: newest[d], reverse=True)[MAX_DIGESTS:]
        for c in self.all():
            if c.module == module and c.digest in old:
                (self.root / c.name).unlink(missing_ok=True)


def stops(steps: list[str]) -> list[Fault]:
    """Flow step 1: the faults that stop a run at each cursor of the crash-free run, in run order."""
    if not steps:
        return []
    return [Fault(steps[0], "step.start", "kill"), *(Fault(st, "step.start", "term") for st in steps[:-1])]


def record(store: CheckpointStore | None, session: Session) -> list[Path]:
    """Flow step 1: keep the current code's mid-run checkpoints; the files written (none when the digest is
    kept already, the store is off, or the worker is not the reference runtime's)."""
    from dataclasses import replace

    from killpoint.run.trial import step_points

    agent = session.agent
    if store is None or session.env.black_box or not session.env.adapter.hold.owned:
        return []
    if store.of(agent):
        store.touch(agent)
        return []
    steps = list(step_points(session.baseline()))
    options = replace(session.options, max_incarnations=1, step_delay=0.0)
    kept: list[StoredCheckpoint] = []
    for fault in stops(steps):
        run_id = session.next_run_id("checkpoint")
        session.drive(run_id, Schedule((fault,)), options, agent=agent)
        with session.env.connect() as conn:
            row = conn.execute("SELECT seq, status, data FROM checkpoints WHERE run_id = %s", (run_id,)).fetchone()
        if row is None or not isinstance(row[2], dict):
            continue
        cursor = str(row[2].get("cursor"))
        if row[1] in TERMINAL or cursor in ("done", *(c.cursor for c in kept)):
            continue
        kept.append(StoredCheckpoint(file_name(agent, len(kept) + 1, cursor), agent.module, agent.state_version,
                                     agent.digest, cursor, str(fault), int(row[0]), str(row[1]), row[2]))
    return store.write(agent, kept) if kept else []
