"""LangGraph under a clock stepped back (the hazard `LangGraphAdapter.notes` explains, and the reason the keyed
invoice graph fails `mixed-faults` at `clock-1h`): PostgresSaver loads a thread's greatest checkpoint id, ids
are uuid6 from the writing process's wall clock, so a resume on a clock behind the thread's last checkpoint
writes a child that sorts below its parent, and LangGraph itself then resumes from the parent again, as
often as it is resumed. The real library, in process, with its id clock moved back an hour (as a fresh
process on that clock: no memory of later ids). Steps: 0 the input, 1 plan's checkpoint, 2 email's (the end).
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import psycopg
import pytest

pytest.importorskip("langgraph.checkpoint.postgres", reason="langgraph-checkpoint-postgres is not installed "
                    "(pip install 'killpoint[langgraph]')")

from langgraph.checkpoint.base import id as lg_id  # noqa: E402
from langgraph.checkpoint.postgres import PostgresSaver  # noqa: E402

from killpoint.adapters import get  # noqa: E402
from killpoint.adapters.langgraph import CLOCK_NOTE  # noqa: E402
from tests.adapters.test_langgraph_adapter import Boom, graph  # noqa: E402

HOUR_NS = 3600 * 10**9
NOTE_HEAD = CLOCK_NOTE.split("{", 1)[0]


def invoke(dsn: str, thread: str, email_fails: bool) -> int:
    """Run (or resume) plan -> email on `thread`; the step of the checkpoint LangGraph loads afterwards."""
    config = {"configurable": {"thread_id": thread}}
    with PostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
        app = graph(saver, email_fails)
        try:
            app.invoke(None if app.get_state(config).created_at else {}, config, durability="sync")
        except Boom:
            pass
        return app.get_state(config).metadata["step"]


def behind(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a new worker process on a clock an hour behind sees: uuid6's clock back, its last id forgotten."""
    monkeypatch.setattr(lg_id, "time", SimpleNamespace(time_ns=lambda: time.time_ns() - HOUR_NS))
    monkeypatch.setattr(lg_id, "_last_v6_timestamp", None)


def test_a_resume_on_a_clock_behind_is_never_done_and_the_note_says_why(pg_dsn, monkeypatch):
    adapter = get("langgraph")
    assert invoke(pg_dsn, "skewed", email_fails=True) == 1  # plan checkpointed, email failed
    for _ in range(2):
        behind(monkeypatch)
        assert invoke(pg_dsn, "skewed", email_fails=False) == 1  # email's checkpoint written, never loaded
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM checkpoints WHERE thread_id = 'skewed' "
                            "AND metadata->>'step' = '2'").fetchone() == (2,)
        assert adapter.status(conn, "skewed") == "running"
        notes = adapter.notes(conn, "skewed")
    assert len(notes) == 1 and notes[0].startswith(NOTE_HEAD), notes
    assert "keep workers' clocks monotonic" in notes[0], notes


def test_a_resume_on_a_clock_behind_from_the_start_is_fine_and_has_no_note(pg_dsn, monkeypatch):
    """The lookalike: a worker whose clock is behind the real one but not behind the thread's checkpoints
    (every write of the thread on that one clock) finishes, and nothing is noted."""
    adapter = get("langgraph")
    behind(monkeypatch)
    assert invoke(pg_dsn, "steady", email_fails=True) == 1
    monkeypatch.setattr(lg_id, "_last_v6_timestamp", None)  # a successor on the same skewed clock
    assert invoke(pg_dsn, "steady", email_fails=False) == 2
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert adapter.status(conn, "steady") == "done"
        assert adapter.notes(conn, "steady") == []
