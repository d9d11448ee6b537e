"""A PostgresSaver whose checkpoint ids never sort below the thread's latest, whatever the writer's clock says.

LangGraph names a checkpoint ``uuid6(clock_seq=step)`` from ``time.time_ns()`` (``create_checkpoint`` in
``langgraph.checkpoint.base``, called by the pregel loop's ``_put_checkpoint``), and PostgresSaver's
``get_tuple`` loads a thread's checkpoint ``ORDER BY checkpoint_id DESC LIMIT 1``. A worker whose clock is
behind the one that wrote the thread's last checkpoint (a node an hour behind, a clock stepped back) writes
checkpoints that sort below it: every resume loads the old one again and redoes its nodes, and the thread
never finishes while that clock lags. uuid6 is monotonic only within one process.

The id cannot be chosen when the loop makes it (``create_checkpoint`` has no hook), and rewriting it in
``put`` alone is not enough: the loop ignores the config ``put`` returns, and names the checkpoint it just
saved by its own id, as the parent of the next ``put`` and in every ``put_writes`` of that step. So this saver
keeps, per process, the map from the loop's ids to the ids it stored, and applies it wherever the loop hands
it an id:

- ``put``: a new checkpoint whose id does not sort above the thread's latest (in the same order ``get_tuple``
  loads by) is stored under the latest's uuid6 timestamp plus one tick (100 ns), keeping the loop's clock
  sequence and node bits; its parent id is translated;
- ``put_writes``, ``get_tuple`` and ``list``: ids the loop made are translated; any other id (one loaded
  from the database) is used as it is.

A thread's stored ids then only grow, in the order they were written, and the thread's latest checkpoint is
the one written last, as LangGraph assumes. The map lives as long as the saver: one saver per process, the
way ``PostgresSaver.from_conn_string`` is used. Sync API only (``AsyncPostgresSaver`` would need the same
overrides of its ``a*`` methods).

    with MonotonicPostgresSaver.from_conn_string(DATABASE_URL) as saver:
        saver.setup()
        graph = builder.compile(checkpointer=saver)
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple
from langgraph.checkpoint.postgres import PostgresSaver

LATEST_SQL = ("SELECT checkpoint_id FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = %s "
              "ORDER BY checkpoint_id DESC LIMIT 1")
"""The thread's latest checkpoint, in the order PostgresSaver.get_tuple loads by."""

TIME_MASK = ((1 << 48) - 1) << 80 | 0x0FFF << 64
"""The 60 timestamp bits of a uuid6 (time_high_and_mid, then time_low after the version nibble)."""


def after(latest: str, mine: str) -> str:
    """A uuid6 that sorts just above ``latest``: its timestamp plus one tick, with ``mine``'s other bits
    (version, variant, the clock sequence LangGraph puts the step in, node)."""
    stamp = uuid.UUID(latest).int & TIME_MASK
    high, low = stamp >> 80, (stamp >> 64) & 0x0FFF
    tick = ((high << 12) | low) + 1
    stamp = ((tick >> 12) & ((1 << 48) - 1)) << 80 | (tick & 0x0FFF) << 64
    return str(uuid.UUID(int=stamp | (uuid.UUID(mine).int & ~TIME_MASK & ((1 << 128) - 1))))


class MonotonicPostgresSaver(PostgresSaver):
    """PostgresSaver that stores a thread's checkpoints under ids that sort in the order they were written."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._stored: dict[str, str] = {}  # the loop's checkpoint id -> the id it is stored under
        self._ids = threading.Lock()

    def _translate(self, config: RunnableConfig | None) -> RunnableConfig | None:
        """``config`` naming the stored id of the checkpoint it names (unchanged if the loop did not make it)."""
        conf = (config or {}).get("configurable", {})
        mine = conf.get("checkpoint_id")
        if not mine or mine not in self._stored:
            return config
        return {**config, "configurable": {**conf, "checkpoint_id": self._stored[mine]}}  # type: ignore[dict-item]

    def _store_as(self, config: RunnableConfig, mine: str) -> str:
        """The id to store the loop's new checkpoint ``mine`` under: itself if it sorts above the thread's
        latest, else just above the latest. Fixed at first sight, so the checkpoint's writes and children
        name the same id."""
        with self._ids:
            if mine not in self._stored:
                conf = config["configurable"]
                with self._cursor() as cur:
                    row = cur.execute(LATEST_SQL, (conf["thread_id"], conf.get("checkpoint_ns", ""))).fetchone()
                latest = row["checkpoint_id"] if row else None
                self._stored[mine] = mine if latest is None or mine > latest else after(latest, mine)
            return self._stored[mine]

    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
            new_versions: ChannelVersions) -> RunnableConfig:
        stored = self._store_as(config, checkpoint["id"])
        return super().put(self._translate(config), {**checkpoint, "id": stored}, metadata,  # type: ignore[arg-type]
                           new_versions)

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                   task_path: str = "") -> None:
        super().put_writes(self._translate(config), writes, task_id, task_path)  # type: ignore[arg-type]

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return super().get_tuple(self._translate(config))  # type: ignore[arg-type]

    def list(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
             before: RunnableConfig | None = None, limit: int | None = None) -> Iterator[CheckpointTuple]:
        return super().list(self._translate(config), filter=filter, before=self._translate(before), limit=limit)
