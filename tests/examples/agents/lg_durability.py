"""A LangGraph graph whose checkpoint durability is a flag: plan -> email -> record, PostgresSaver, the
email sent with Resend's SDK under the key `RUN_ID:email` (a repeat is answered with the first email).

    python lg_durability.py RUN_ID --durability exit|sync|async [--no-email]

`exit` checkpoints only when the graph ends: killed mid-run, nothing of the run is stored and a restart
begins again (correct, as the email is keyed, but there is no checkpoint for killpoint to crash at).
`sync` checkpoints each superstep before the next starts (the correct lookalike that can be tested);
`async` (LangGraph's default) writes each checkpoint while the next node runs. `--no-email`: the email node
sends nothing (a graph with no request to a service: its only fault points are its checkpoints).
"""

from __future__ import annotations

import os
import sys
from typing import TypedDict

import resend
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import END, START, StateGraph


class Invoice(TypedDict, total=False):
    customer: str
    amount_cents: int
    email_id: str
    recorded: bool


def build(saver: PostgresSaver, run_id: str, send: bool = True):
    def plan(state: Invoice) -> Invoice:
        return {"customer": "ada@example.com", "amount_cents": 4200}

    def email(state: Invoice) -> Invoice:
        if not send:
            return {"email_id": "unsent"}
        params: resend.Emails.SendParams = {
            "from": "billing@example.com", "to": [state["customer"]],
            "subject": "Your invoice", "html": f"<p>Amount due: {state['amount_cents'] / 100:.2f} EUR</p>",
        }
        return {"email_id": resend.Emails.send(params, {"idempotency_key": f"{run_id}:email"})["id"]}

    def record(state: Invoice) -> Invoice:
        return {"recorded": True}

    graph = StateGraph(Invoice)
    for name, node in (("plan", plan), ("email", email), ("record", record)):
        graph.add_node(name, node)
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "email")
    graph.add_edge("email", "record")
    graph.add_edge("record", END)
    return graph.compile(checkpointer=saver)


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-") or "--durability" not in argv:
        print("usage: lg_durability.py RUN_ID --durability exit|sync|async", file=sys.stderr)
        return 2
    run_id, durability = argv[0], argv[argv.index("--durability") + 1]
    resend.api_key = os.environ.get("RESEND_API_KEY", "re_test")
    config = {"configurable": {"thread_id": run_id}}
    with PostgresSaver.from_conn_string(os.environ["DATABASE_URL"]) as saver:
        saver.setup()
        app = build(saver, run_id, send="--no-email" not in argv)
        start = {} if app.get_state(config).created_at is None else None
        app.invoke(start, config, durability=durability)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
