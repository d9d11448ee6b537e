"""Adapters: where a durable-agent runtime keeps a run's progress, so that a black-box worker is judged
from its framework's own records (no mirror table in the user's code).

An adapter answers these questions about one run id, each from the runtime's own tables (and, for the
drivers of many runs, about several at once):

1. `status(conn, run_id)`: "done", "failed", "running" (records say the run has more to do), or None (no
   records at all, also when the runtime's tables do not exist yet: `base.fetch_one`). The controller ends
   a run when this is "done", or when the worker exited 0 and the records do not say otherwise (None counts
   as "nothing says otherwise").
2. `cursor(conn, run_id)`: the step in progress (the one a request sent now belongs to, and the one a
   commit held now checkpoints), or None. Step attribution uses it after a request's own `Killpoint-Step`
   header and its key (harness/run/attribution.py).
3. `progress(conn, run_id)`: `(cursor, seq)`, where `seq` is the run's last committed seq, which grows by
   one at each commit of a step (the seeds' seq, LangGraph's superstep, DBOS's function id). The SQL
   barrier reads it before and after a held commit: the write held at `checkpoint.writing` is at seq + 1,
   and a move of it is `checkpoint.committed`.
4. `final(conn, run_id)`: `(record, raw_text)`, the run's final record for the evidence (None if none).
5. `expire(conn, run_id)`: make a dead or frozen worker's claim on the run lapse (the passage of time), so
   a successor may take it over; a no-op for a runtime without leases.
6. `concurrent_runs`: whether runs may be driven at the same time (`-j`); `serial_reason` says why not.
7. `statuses(conn, run_ids)`: `status` of each run id, in one read where the runtime allows it.
8. `expire_owners(conn, owners)`: `expire` for every run whose claim is held by one of `owners` (ended
   incarnations, by id: a queue worker holds the leases of whichever runs it served); how many lapsed.
9. `submit(conn, run_ids, module, params)`: create runs as an application would, for queue workers to
   take (a first record and a job each); a runtime the harness cannot create runs for refuses (UsageError).
10. `retire(conn, run_id)`: once a run's evidence is read and its processes are gone, leave nothing of it
   that a later run's worker would pick up (DBOS: its unfinished workflows, which any process of the
   application dequeues); how many records it retired. A no-op where nothing is picked up across runs.
11. `notes(conn, run_id)`: what the runtime's own records show it did that explains a failure, one line
    each with its fix (LangGraph: a checkpoint whose time-ordered id sorts below its parent's); printed in
    the failure block (`runtime:`), judged by no checker.
12. `fence(conn)` / `unfence(conn)`: install (with the barrier, once the runtime's tables exist) and remove
    what keeps concurrent runs apart where the runtime shares something between them (DBOS: its recovery
    queue, one per system database); a no-op elsewhere.
13. `recorded(conn, besides, limit)`: up to `limit` run ids the runtime's records hold other than `besides`
    (sorted; none before its tables exist): a crash-free run of a black-box worker that recorded nothing
    under its run id names them, since a worker that records under an id of its own (a thread id written
    in the code, a workflow started without its id) is the likely cause.

and names, in `hold`, the table whose commits are the run's checkpoint points: the SQL barrier
(harness/env/sqlbarrier.py) puts its deferred trigger there and holds the commits `hold.when` selects
(an SQL boolean over `r`, the written row as jsonb, and `TG_OP`). `hold.owned` is False for a table
the user's framework creates: killpoint then installs its trigger only once the table exists, and
removes it when the session ends, so nothing of killpoint is left on the user's table.

Adapters here: "checkpoints" (the seeds' table, the default), "langgraph" (LangGraph's PostgresSaver),
"dbos" (DBOS's system database). Another runtime (Temporal, a team's own) is one more class with these
methods (killpoint/adapters/base.py), added to `get` and `names`.
"""

from __future__ import annotations

from killpoint.adapters.base import Adapter, CheckpointsAdapter, Hold, table_exists
from killpoint.errors import UsageError

DEFAULT = "checkpoints"


def names() -> list[str]:
    """The adapters `--adapter` accepts."""
    return ["checkpoints", "langgraph", "dbos"]


def get(name: str | None) -> Adapter:
    """The adapter called `name` (None: the default). Unknown names are a usage error."""
    name = name or DEFAULT
    if name == "checkpoints":
        return CheckpointsAdapter()
    if name == "langgraph":
        from killpoint.adapters.langgraph import LangGraphAdapter

        return LangGraphAdapter()
    if name == "dbos":
        from killpoint.adapters.dbos import DbosAdapter

        return DbosAdapter()
    raise UsageError("unknown-adapter", f"unknown adapter {name!r}", f"use one of: {', '.join(names())}")


__all__ = ["DEFAULT", "Adapter", "CheckpointsAdapter", "Hold", "get", "names", "table_exists"]
