"""The checkpoint store's files (killpoint.run.checkpoint_store), without Postgres: which kept checkpoints the
current code must resume, in which order, under which seed, and how the folder stays bounded."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

from killpoint.env.stepmodule import AgentSpec
from killpoint.run.checkpoint_store import (
    MAX_DIGESTS,
    MAX_PER_DIGEST,
    CheckpointStore,
    StoredCheckpoint,
    file_name,
    stops,
)

AGENT = AgentSpec(module="parcel.steps", start="pack", steps=("pack", "notify", "book"), state_version=2,
                  digest="d0", own_effects_sql=None)


def checkpoints(agent: AgentSpec, cursors: list[str]) -> list[StoredCheckpoint]:
    return [StoredCheckpoint(file_name(agent, i, c), agent.module, agent.state_version, agent.digest, c,
                             f"{c}:step.start:term", i, "paused",
                             {"run_id": "checkpoint-1", "cursor": c, "version": agent.state_version})
            for i, c in enumerate(cursors, 1)]


def test_older_digests_at_the_same_or_an_older_version_sorted_by_name(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "checkpoints")
    v1, same, newer = replace(AGENT, state_version=1, digest="a1"), replace(AGENT, digest="b2"), \
        replace(AGENT, state_version=3, digest="c3")
    other = replace(AGENT, module="other.steps", state_version=1, digest="e5")
    for agent in (newer, same, v1, AGENT, other):
        store.write(agent, checkpoints(agent, ["notify", "pack"]))
    names = [c.name for c in store.older(AGENT)]
    assert names == sorted(names) and {c.digest for c in store.older(AGENT)} == {"a1", "b2"}
    assert names[0] == "parcel.steps-v1-a1-01-notify.json"
    kept = store.older(AGENT)[0]
    assert kept.data == {"run_id": "checkpoint-1", "cursor": "notify", "version": 1}  # the row as stored
    assert kept.seed == StoredCheckpoint.from_json(kept.name, kept.to_json()).seed  # the name alone says it
    assert len({c.seed for c in store.older(AGENT)}) == len(names)


def test_bounded_per_digest_and_per_module(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "checkpoints")
    many = [f"s{i}" for i in range(MAX_PER_DIGEST + 4)]
    agents = [replace(AGENT, digest=f"d{i}") for i in range(MAX_DIGESTS + 2)]
    for i, agent in enumerate(agents):
        store.write(agent, checkpoints(agent, many))
        for c in store.of(agent):  # recorded one after another (mtime is what "recent" means)
            os.utime(store.root / c.name, (1000.0 + i, 1000.0 + i))
    assert {c.digest for c in store.all()} == {a.digest for a in agents[-MAX_DIGESTS:]}
    assert all(len(store.of(a)) == MAX_PER_DIGEST for a in agents[-MAX_DIGESTS:])
    store.write(agents[-1], checkpoints(agents[-1], ["pack"]))  # recorded again: its stale cursors go
    assert [c.cursor for c in store.of(agents[-1])] == ["pack"]
    assert not list(store.root.glob(".checkpoint-*"))  # no temporary file left


def test_an_unreadable_file_is_ignored_and_the_stops_cover_every_cursor(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "checkpoints")
    store.root.mkdir(parents=True)
    (store.root / "parcel.steps-v1-zz-01-pack.json").write_text("{torn")
    (store.root / "parcel.steps-v1-zy-01-pack.json").write_text(json.dumps({"module": "parcel.steps"}))
    assert store.older(AGENT) == []
    assert [str(f) for f in stops(["pack", "notify", "book"])] == [
        "pack:step.start:kill", "pack:step.start:term", "notify:step.start:term"]
    assert stops([]) == []
