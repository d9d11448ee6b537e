"""A LangGraph fan-in (`add_edge(["email", "copy2"], "record")`) triggers its node through a join channel that
LangGraph keeps as a blob, not among the checkpoint's values: a checkpoint taken after both sources ran and
before `record` did is not done (before: the adapter read it as done, so a worker killed there was never
resumed and the run ended without `record`). Read from a real graph's rows: the adapter's status and cursor,
and the audit trail's per-commit cursor and status, at each point of the graph, including a join one of
whose sources never ran (done: nothing will ever trigger it). The same for a fan-out: `Send` packets wait
in `__pregel_tasks`, another blob."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import psycopg
import pytest

pytest.importorskip("langgraph.checkpoint.postgres", reason="pip install 'killpoint[langgraph]'")

from langgraph.checkpoint.postgres import PostgresSaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.types import Send  # noqa: E402

from killpoint.adapters import get  # noqa: E402
from killpoint.env import audit  # noqa: E402


class State(TypedDict, total=False):
    plan: int
    email: int
    copy: int
    record: int
    skip: bool


def fan_in(saver: PostgresSaver, stop_before: list[str]):
    """plan -> (email, copy -> copy2) -> record: uneven branches into one join; `copy` may skip `copy2`."""
    g = StateGraph(State)
    g.add_node("plan", lambda s: {"plan": 1})
    g.add_node("email", lambda s: {"email": 1})
    g.add_node("copy", lambda s: {"copy": 1})
    g.add_node("copy2", lambda s: {"copy": 2})
    g.add_node("record", lambda s: {"record": 1})
    g.add_edge(START, "plan")
    g.add_edge("plan", "email")
    g.add_edge("plan", "copy")
    g.add_conditional_edges("copy", lambda s: END if s.get("skip") else "copy2", ["copy2", END])
    g.add_edge(["email", "copy2"], "record")
    g.add_edge("record", END)
    return g.compile(checkpointer=saver, interrupt_before=stop_before)


def step(dsn: str, thread: str, stop_before: list[str], first: dict | None) -> None:
    with PostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
        fan_in(saver, stop_before).invoke(first, {"configurable": {"thread_id": thread}}, durability="sync")


def audited(dsn: str) -> None:
    """LangGraph's tables, and the audit trigger killpoint puts on its checkpoints (per-commit cursor, status)."""
    with PostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
    with psycopg.connect(dsn, autocommit=True) as conn:
        audit.install(conn, hold=get("langgraph").hold)


def read(dsn: str, thread: str) -> tuple[str | None, str | None]:
    """The adapter's status and cursor of `thread`."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return get("langgraph").status(conn, thread), get("langgraph").cursor(conn, thread)


def trail(dsn: str, thread: str) -> list[tuple[str, str]]:
    """The audit trail's (cursor, status) of each committed checkpoint of `thread`, in order."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute("SELECT cursor, status FROM killpoint_audit WHERE run_id = %s ORDER BY seq",
                            (thread,)).fetchall()


def test_a_complete_join_not_yet_run_is_pending_and_an_emptied_one_is_not(pg_dsn: str) -> None:
    audited(pg_dsn)

    step(pg_dsn, "t", ["copy2"], {})            # plan, then email and copy ran: the join has email only
    assert read(pg_dsn, "t") == ("running", "copy2")
    step(pg_dsn, "t", ["record"], None)         # copy2 ran: the join is complete, record not run
    assert read(pg_dsn, "t") == ("running", "record")  # before: ("done", None)
    step(pg_dsn, "t", [], None)                 # record ran: the join is emptied
    assert read(pg_dsn, "t") == ("done", None)
    assert trail(pg_dsn, "t") == [
        ("plan", "running"), ("copy", "running"), ("copy2", "running"), ("record", "running"), ("done", "done")]

    step(pg_dsn, "u", [], {"skip": True})       # copy ends the branch: the join never completes
    assert read(pg_dsn, "u") == ("done", None)


class Items(TypedDict, total=False):
    items: list
    out: Annotated[list, operator.add]
    done: bool


def fan_out(saver: PostgresSaver, stop_before: list[str]):
    """plan -> Send("work", ...) per item -> record: the packets wait in `__pregel_tasks`, a blob."""
    g = StateGraph(Items)
    g.add_node("plan", lambda s: {"items": [1, 2]})
    g.add_node("work", lambda a: {"out": [a["x"]]})
    g.add_node("record", lambda s: {"done": True})
    g.add_edge(START, "plan")
    g.add_conditional_edges("plan", lambda s: [Send("work", {"x": i}) for i in s["items"]], ["work"])
    g.add_edge("work", "record")
    g.add_edge("record", END)
    return g.compile(checkpointer=saver, interrupt_before=stop_before)


def test_pending_send_packets_are_pending_and_name_their_node(pg_dsn: str) -> None:
    audited(pg_dsn)
    config = {"configurable": {"thread_id": "s"}}
    with PostgresSaver.from_conn_string(pg_dsn) as saver:
        fan_out(saver, ["work"]).invoke({}, config, durability="sync")  # plan ran: two packets wait
        assert read(pg_dsn, "s") == ("running", "work")  # before: ("done", None)
        fan_out(saver, []).invoke(None, config, durability="sync")
    assert read(pg_dsn, "s") == ("done", None)
    assert trail(pg_dsn, "s") == [("plan", "running"), ("work", "running"), ("record", "running"), ("done", "done")]
