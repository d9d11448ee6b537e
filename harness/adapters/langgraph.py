"""LangGraph's PostgresSaver as a run's records: the checkpointer's `checkpoints` table by thread id.

A killpoint run id is the graph's `thread_id` (the worker passes `{"configurable": {"thread_id": run_id}}`);
node names are the steps. Read without importing LangGraph, from the rows it writes:

1. The run's latest checkpoint is its row with the greatest `checkpoint_id` (uuid6, ordered by time) in
   the root namespace (`checkpoint_ns = ''`).
2. The nodes still to run are the `branch:to:NODE` keys of that checkpoint's `channel_values` (LangGraph
   keeps a trigger channel per scheduled node and drops it once the node has run), and the nodes of a fan-in
   (`add_edge(["a", "b"], "c")`) whose join channel is complete and not yet consumed (`joined`: it is kept
   as a blob, not among the values), and the nodes of pending `Send` packets (a fan-out: `sent`). The
   first of them, by name, is the cursor: the node in progress, which a request sent now belongs to and
   which the checkpoint being committed now records.
3. Status: no row, None; a `loop` checkpoint with no node left, "done"; otherwise "running".
4. Checkpoint points: the commit of each new `loop` checkpoint (an INSERT), held by the SQL barrier; its
   seq (in the audit trail, and the marker that moves at each commit) is LangGraph's superstep number,
   `metadata.step`, which grows by one per checkpoint.
5. The final record is the latest checkpoint's inline channel values (values LangGraph keeps as blobs,
   and its trigger channels, are left out), as `state`.
6. A graph invoked with `durability="exit"` writes its checkpoints only when the graph ends, after every
   node ran: no commit lies inside a node, so no checkpoint point can be tested, and `no_checkpoint_hint`
   says to invoke it with `durability="sync"`. With the default `durability="async"`, each checkpoint is
   written while the next node already runs: a request that node sends may be read against the previous
   node's checkpoint (attributed to the previous node) unless its key or a `Killpoint-Step` header names
   its node; `durability="sync"` writes each checkpoint before the next node starts.
7. Notes (`notes`): LangGraph's checkpoint ids are uuid6, made from the writing process's wall clock
   (`langgraph.checkpoint.base.id.uuid6`, kept increasing only within one process), and PostgresSaver's
   `get_tuple` without a checkpoint id loads the thread's greatest id. A worker whose clock is behind the
   thread's last checkpoint (a clock stepped back, a node with a skewed clock) writes a child checkpoint that
   sorts below its parent: the next resume loads an older checkpoint and redoes its nodes, and nothing that
   clock writes ever becomes the latest. Each such child, found in the thread's rows, is one note naming
   this cause and its fix; it is a failure of the graph on its framework (the checkers still judge it).
"""

from __future__ import annotations

from typing import Any

import psycopg

from killpoint.adapters.base import FrameworkRecords, Hold, fetch_all, fetch_one, table_exists

BRANCH = "branch:to:"
JOIN = "join:"


def _msgpack_str(name: str) -> str:
    """SQL: the text expression `name` as msgpack encodes a string (fixstr under 32 bytes, else str8)."""
    raw = f"convert_to({name}, 'UTF8')"
    return (f"(CASE WHEN octet_length({raw}) < 32 THEN set_byte(decode('00', 'hex'), 0, 160 + octet_length({raw})) "
            f"ELSE set_byte(decode('d900', 'hex'), 1, least(octet_length({raw}), 255)) END || {raw})")


def joined(checkpoint: str, thread: str, ns: str) -> str:
    """SQL: the nodes that a complete join of `checkpoint` (a jsonb expression; its thread and namespace) has
    triggered and that have not run yet (flow step 2), as a text array (NULL for none).

    A node with several incoming edges (`add_edge(["a", "b"], "c")`) is triggered by the channel
    `join:a+b:c`, a set of the sources seen so far, which LangGraph keeps as a blob (`checkpoint_blobs`,
    at the version `channel_versions` names), never among the inline `channel_values`: the join is complete
    when every source is in it, and it is emptied when `c` runs. The set is read without LangGraph by the
    encoded names in the blob: a msgpack string each (JsonPlusSerializer's "msgpack"), or a quoted one in
    a "json" blob; a blob of another kind is never counted complete."""
    return f"""(SELECT array_agg(regexp_replace(j.key, '^.*:', '') ORDER BY j.key)
  FROM jsonb_each_text({checkpoint}->'channel_versions') AS j(key, ver)
  JOIN checkpoint_blobs b ON b.thread_id = {thread} AND b.checkpoint_ns = {ns} AND b.channel = j.key
                         AND b.version = j.ver
  WHERE left(j.key, {len(JOIN)}) = '{JOIN}' AND b.blob IS NOT NULL AND b.type IN ('msgpack', 'json')
    AND NOT EXISTS (SELECT 1 FROM unnest(string_to_array(split_part(j.key, ':', 2), '+')) AS n(name)
                    WHERE position((CASE WHEN b.type = 'json' THEN convert_to('"' || n.name || '"', 'UTF8')
                                         ELSE {_msgpack_str('n.name')} END) IN b.blob) = 0))"""


TASKS = "__pregel_tasks"
SEND = "a453656e6492"
"""A `Send` packet as msgpack encodes it, up to its node: the string "Send" (0xa4 + 4 bytes), then a
2-array (0x92) whose first item is the node's name."""


def sent(checkpoint: str, thread: str, ns: str) -> str:
    """SQL: the nodes that pending `Send` packets of `checkpoint` will run (a fan-out, `Send("email", {...})`
    from a conditional edge), as a text array (NULL for none; '' for a packet whose node cannot be read).

    LangGraph keeps the packets in the channel `__pregel_tasks`, a blob like a join's (`joined`), emptied once
    they ran: pending while that blob, at the version `channel_versions` names, is a non-empty list (msgpack
    0x90 and json `[]` are empty). The node named is the first packet's (a msgpack string after "Send")."""
    return f"""(SELECT ARRAY[coalesce(CASE WHEN s.at > 0 THEN CASE WHEN get_byte(b.blob, s.at + 5) BETWEEN 161 AND 191
    THEN convert_from(substring(b.blob FROM s.at + 7 FOR get_byte(b.blob, s.at + 5) - 160), 'UTF8') END END, '')]
  FROM checkpoint_blobs b
  CROSS JOIN LATERAL (SELECT CASE WHEN b.type = 'msgpack' THEN position(decode('{SEND}', 'hex') IN b.blob)
                                  ELSE 0 END AS at) s
  WHERE b.thread_id = {thread} AND b.checkpoint_ns = {ns} AND b.channel = '{TASKS}'
    AND b.version = {checkpoint}->'channel_versions'->>'{TASKS}' AND b.blob IS NOT NULL
    AND ((b.type = 'msgpack' AND get_byte(b.blob, 0) <> 144) OR (b.type = 'json' AND btrim(convert_from(b.blob,
         'UTF8')) <> '[]')))"""


LATEST_SQL = f"""
SELECT checkpoint->'channel_values', metadata->>'source',
       (SELECT max((c.metadata->>'step')::bigint) FROM checkpoints c
        WHERE c.thread_id = %(run)s AND c.checkpoint_ns = '' AND c.metadata->>'source' = 'loop'),
       {joined("checkpoint", "thread_id", "checkpoint_ns")} || {sent("checkpoint", "thread_id", "checkpoint_ns")}
FROM checkpoints WHERE thread_id = %(run)s AND checkpoint_ns = ''
ORDER BY checkpoint_id DESC LIMIT 1
"""

PENDING = f"""(SELECT array_agg(n ORDER BY n) FROM (
  SELECT substr(k, {len(BRANCH) + 1}) FROM jsonb_object_keys(r->'checkpoint'->'channel_values') AS k
  WHERE left(k, {len(BRANCH)}) = '{BRANCH}'
  UNION SELECT unnest({joined("r->'checkpoint'", "r->>'thread_id'", "coalesce(r->>'checkpoint_ns', '')")})
  UNION SELECT unnest({sent("r->'checkpoint'", "r->>'thread_id'", "coalesce(r->>'checkpoint_ns', '')")})) AS p(n))"""
"""SQL over `r`, a written checkpoints row as jsonb: the nodes still to run after it (flow step 2), sorted,
for the audit trail's cursor and status."""

BEHIND_SQL = """
SELECT (c.metadata->>'step')::bigint, (p.metadata->>'step')::bigint
FROM checkpoints c JOIN checkpoints p
  ON p.thread_id = c.thread_id AND p.checkpoint_ns = c.checkpoint_ns AND p.checkpoint_id = c.parent_checkpoint_id
WHERE c.thread_id = %(run)s AND c.checkpoint_ns = '' AND c.checkpoint_id < p.checkpoint_id
ORDER BY c.checkpoint_id
"""
"""Flow step 7: the root checkpoints whose id sorts below their parent's, with both steps (LangGraph's own
order: the same text comparison its `ORDER BY checkpoint_id DESC` makes)."""

CLOCK_NOTE = ("LangGraph orders a thread's checkpoints by uuid6 ids taken from the writer's wall clock, and {n} "
              "of this thread's sort below their parent ({pairs}): a worker whose clock was behind wrote them, so "
              "a resume loads an older checkpoint and redoes its nodes, never done while that clock lags; fix: "
              "keep workers' clocks monotonic (NTP slewing, not stepping) and never resume a thread on a node "
              "whose clock is behind its last checkpoint")
"""Flow step 7's note: its first words (up to the colon) are the same for every run it is met in."""


class LangGraphAdapter(FrameworkRecords):
    """LangGraph (langgraph-checkpoint-postgres) on the run database's search path."""

    name = "langgraph"
    concurrent_runs = True
    system_schemas: tuple[str, ...] = ()  # its tables go where the search path says
    serial_reason = ""
    hold = Hold(table="checkpoints", run_column="thread_id",
                when="TG_OP = 'INSERT' AND r->'metadata'->>'source' = 'loop' "
                     "AND coalesce(r->>'checkpoint_ns', '') = ''",
                seq="(r->'metadata'->>'step')::bigint",
                cursor=f"coalesce(nullif(({PENDING})[1], ''), CASE WHEN {PENDING} IS NULL THEN 'done' END)",
                status=f"CASE WHEN {PENDING} IS NULL THEN 'done' ELSE 'running' END")

    def no_checkpoint_hint(self, commits: int) -> str:
        """Flow step 6."""
        return ("the graph checkpoints only at exit (durability='exit'): invoke it with durability='sync' "
                "so each node's checkpoint is committed before the next node runs")

    def late_checkpoint_hint(self, step: str) -> str:
        """Flow step 6: the default durability="async"."""
        return (f"the graph writes each checkpoint while the next node runs (durability='async', the default), so "
                f"a request of {step} is attributed to the node before it unless its key or a Killpoint-Step "
                "header names its node: invoke the graph with durability='sync'")

    def notes(self, conn: psycopg.Connection, run_id: str) -> list[str]:
        """Flow step 7: one note when a checkpoint of the run sorts below its parent (none otherwise)."""
        if not table_exists(conn, "checkpoints"):
            return []
        rows = conn.execute(BEHIND_SQL, {"run": run_id}).fetchall()
        if not rows:
            return []
        pairs = ", ".join(f"step {c} below step {p}" for c, p in sorted(set(rows)))
        return [CLOCK_NOTE.format(n=len(rows), pairs=pairs)]

    def recorded(self, conn: psycopg.Connection, besides: list[str], limit: int = 5) -> list[str]:
        """The threads the checkpointer holds besides `besides` (a graph invoked with a thread id of its own,
        `{"thread_id": "1"}`, instead of the run id)."""
        return [r[0] for r in fetch_all(conn, "SELECT DISTINCT thread_id FROM checkpoints WHERE NOT "
                                              "(thread_id = ANY(%s)) ORDER BY thread_id LIMIT %s", (besides, limit))]

    def _latest(self, conn: psycopg.Connection, run_id: str) -> tuple[dict, str | None, int, list[str]] | None:
        row: Any = fetch_one(conn, LATEST_SQL, {"run": run_id})
        return (row[0] or {}, row[1], -1 if row[2] is None else int(row[2]), list(row[3] or [])) if row else None

    @staticmethod
    def _next(values: dict, joins: list[str]) -> list[str]:
        """The nodes still to run (flow step 2): those a `branch:to:` channel, a complete join or a pending
        `Send` triggers ('' for a `Send` whose node cannot be read: still to run, named by no cursor)."""
        return sorted({k[len(BRANCH):] for k in values if k.startswith(BRANCH)} | set(joins))

    def status(self, conn: psycopg.Connection, run_id: str) -> str | None:
        latest = self._latest(conn, run_id)
        if latest is None:
            return None
        values, source, _, joins = latest
        return "done" if source == "loop" and not self._next(values, joins) else "running"

    def cursor(self, conn: psycopg.Connection, run_id: str) -> str | None:
        return self.progress(conn, run_id)[0]

    def progress(self, conn: psycopg.Connection, run_id: str) -> tuple[str | None, int | None]:
        latest = self._latest(conn, run_id)
        if latest is None:
            return None, None
        pending = [n for n in self._next(latest[0], latest[3]) if n]
        return (pending[0] if pending else None), latest[2]

    def final(self, conn: psycopg.Connection, run_id: str) -> tuple[dict | None, str | None]:
        latest = self._latest(conn, run_id)
        if latest is None:
            return None, None
        values, source, count, joins = latest
        pending = self._next(values, joins)
        done = source == "loop" and not pending
        pending = [n for n in pending if n]
        record = {"run_id": run_id, "seq": count, "cursor": "done" if done else (pending[0] if pending else None),
                  "status": "done" if done else "running",
                  "state": {k: v for k, v in values.items() if not k.startswith(BRANCH)}}
        return record, None
