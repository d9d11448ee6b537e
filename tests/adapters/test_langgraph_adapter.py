"""The LangGraph adapter reads a real graph's progress from PostgresSaver's own tables, and the SQL barrier's
trigger sits on LangGraph's `checkpoints` without breaking LangGraph's writes and leaves nothing behind."""

from __future__ import annotations

from typing import TypedDict

import psycopg
import pytest

pytest.importorskip("langgraph.checkpoint.postgres", reason="langgraph-checkpoint-postgres is not installed "
                    "(pip install 'killpoint[langgraph]')")

from langgraph.checkpoint.postgres import PostgresSaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402

from killpoint.adapters import get, table_exists  # noqa: E402
from killpoint.env import sqlbarrier  # noqa: E402


class State(TypedDict, total=False):
    planned: int
    sent: int


class Boom(Exception):
    pass


def graph(saver: PostgresSaver, fail_in_email: bool):
    def plan(_s: State) -> State:
        return {"planned": 1}

    def email(_s: State) -> State:
        if fail_in_email:
            raise Boom("the mailer is down")
        return {"sent": 1}

    g = StateGraph(State)
    g.add_node("plan", plan)
    g.add_node("email", email)
    g.add_edge(START, "plan")
    g.add_edge("plan", "email")
    g.add_edge("email", END)
    return g.compile(checkpointer=saver)


def run(dsn: str, thread: str, fail_in_email: bool) -> None:
    with PostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
        app = graph(saver, fail_in_email)
        try:
            app.invoke({}, {"configurable": {"thread_id": thread}}, durability="sync")
        except Boom:
            pass


def test_status_cursor_and_final_come_from_langgraphs_tables(pg_dsn):
    adapter = get("langgraph")
    run(pg_dsn, "r-half", fail_in_email=True)   # plan committed, email in progress
    run(pg_dsn, "r-done", fail_in_email=False)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert adapter.status(conn, "r-none") is None
        assert adapter.status(conn, "r-half") == "running"
        assert adapter.cursor(conn, "r-half") == "email"
        assert adapter.status(conn, "r-done") == "done"
        assert adapter.cursor(conn, "r-done") is None
        final, _ = adapter.final(conn, "r-done")
        assert final is not None
        assert (final["status"], final["cursor"], final["state"]) == ("done", "done", {"planned": 1, "sent": 1})
        _, before = adapter.progress(conn, "r-half")
    run(pg_dsn, "r-half", fail_in_email=False)  # resumed: email runs, its checkpoint commits
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert adapter.status(conn, "r-half") == "done"
        _, after = adapter.progress(conn, "r-half")
    assert before is not None and after is not None and after > before


def test_barrier_trigger_on_langgraphs_table_keeps_its_writes_working_and_is_removed(pg_dsn):
    hold = get("langgraph").hold
    run(pg_dsn, "r-1", fail_in_email=False)  # LangGraph makes its tables
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert table_exists(conn, hold.table)
        sqlbarrier.install(conn, hold=hold)
        # a run listed in killpoint_barrier whose lock nobody holds: the trigger takes it and goes on
        conn.execute("INSERT INTO killpoint_barrier (run_id, key) VALUES ('r-2', %s)", (sqlbarrier.key_of("r-2"),))
    run(pg_dsn, "r-2", fail_in_email=False)  # no `record "new" has no field "run_id"`
    run(pg_dsn, "r-3", fail_in_email=False)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert get("langgraph").status(conn, "r-2") == "done"
        assert get("langgraph").status(conn, "r-3") == "done"
        sqlbarrier.uninstall(conn, hold)
        left = conn.execute("SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'killpoint%%' "
                            "AND tgrelid = 'checkpoints'::regclass").fetchone()
        assert left == (0,)
