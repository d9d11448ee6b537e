"""An invoice graph on LangGraph, as a LangGraph user writes it: plan -> email -> record, checkpointed by
PostgresSaver, the email sent with Resend's own SDK. Nothing in it knows killpoint.

    python invoice_graph.py RUN_ID [--keyed] [--durability sync|async]

starts the run `RUN_ID` (the graph's thread id) or, if the thread has a checkpoint, resumes it where it
stopped (a finished thread has nothing left to run). Without `--keyed`, the email is sent bare: killed after Resend
applied it and before LangGraph checkpointed the node, a resume sends it again. With `--keyed`, it carries
the idempotency key `RUN_ID:email`, and Resend answers a repeat with the first email. `--durability`
is LangGraph's (default here `sync`: each node's checkpoint is committed before the next node starts;
`async` writes it while the next node runs, LangGraph's own default).

Environment: DATABASE_URL (Postgres), RESEND_API_KEY and RESEND_API_URL (the resend SDK reads it at import).
Under killpoint:

    killpoint run --adapter langgraph --worker-cmd 'python examples/langgraph/invoice_graph.py {run_id} --keyed'
"""

from __future__ import annotations

import os
import sys
from typing import TypedDict, cast

import psycopg
import resend
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Durability


class Invoice(TypedDict, total=False):
    customer: str
    amount_cents: int
    email_id: str
    recorded: bool


def build(saver: PostgresSaver, run_id: str, keyed: bool):
    def plan(state: Invoice) -> Invoice:
        return {"customer": "ada@example.com", "amount_cents": 4200}

    def email(state: Invoice) -> Invoice:
        params: resend.Emails.SendParams = {
            "from": "billing@example.com", "to": [state["customer"]],
            "subject": "Your invoice", "html": f"<p>Amount due: {state['amount_cents'] / 100:.2f} EUR</p>",
        }
        options: resend.Emails.SendOptions = {"idempotency_key": f"{run_id}:email"} if keyed else {}
        sent = resend.Emails.send(params, options)
        return {"email_id": sent["id"]}

    def record(state: Invoice) -> Invoice:
        return {"recorded": True}

    graph = StateGraph(Invoice)
    graph.add_node("plan", plan)
    graph.add_node("email", email)
    graph.add_node("record", record)
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "email")
    graph.add_edge("email", "record")
    graph.add_edge("record", END)
    return graph.compile(checkpointer=saver)


def main(argv: list[str]) -> int:
    durability = argv[argv.index("--durability") + 1] if "--durability" in argv[:-1] else "sync"
    if not argv or argv[0].startswith("-") or durability not in ("sync", "async"):
        print("usage: invoice_graph.py RUN_ID [--keyed] [--durability sync|async]", file=sys.stderr)
        return 2
    run_id, keyed = argv[0], "--keyed" in argv[1:]
    resend.api_key = os.environ.get("RESEND_API_KEY", "re_test")
    config = {"configurable": {"thread_id": run_id}}
    # One live worker per thread: LangGraph has no lease or fencing, so a worker frozen mid-run (a long GC
    # pause, a stopped VM) and thawed after another took over would go on writing the same thread. A
    # session lock on the thread id is held for as long as this process lives: a second worker waits for
    # it (the first finishes or dies, and its session with it), then resumes the thread from its last
    # checkpoint, which has nothing left to run if the first finished it.
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as lock:
        lock.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (f"invoice_graph:{run_id}",))
        return run(run_id, keyed, config, cast(Durability, durability))


def run(run_id: str, keyed: bool, config: dict, durability: Durability = "sync") -> int:
    with PostgresSaver.from_conn_string(os.environ["DATABASE_URL"]) as saver:
        saver.setup()
        app = build(saver, run_id, keyed)
        if app.get_state(config).created_at is None:
            app.invoke({}, config, durability=durability)  # a new run
        else:
            # Resume from the last checkpoint (a finished thread has nothing left to run). Not `if
            # snapshot.next:`: a node whose writes were saved but whose superstep was not checkpointed
            # leaves `next` empty, and the run would never finish.
            app.invoke(None, config, durability=durability)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
