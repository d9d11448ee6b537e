"""A LangGraph graph whose sends run in parallel in one superstep, PostgresSaver, Resend's SDK:

    python lg_parallel.py RUN_ID --shape fan-in|send [--keyed]

`fan-in`: plan -> (email, copy) -> record, two nodes sending one email each, joined by
`add_edge(["email", "copy"], "record")` (LangGraph triggers `record` through a join channel it keeps as a
blob). `send`: plan -> `Send("email", {"to": ...})` per customer (three parallel runs of one node, whose
packets LangGraph keeps as a blob too) -> record. With `--keyed` each email carries the key
`RUN_ID:<node>:<to>` and a repeat is answered with the first email: correct, it must pass. Bare, a kill
while the branches are in flight sends an email twice.
"""

from __future__ import annotations

import operator
import os
import sys
from typing import Annotated, TypedDict

import resend
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

CUSTOMERS = ["ada@example.com", "bob@example.com", "cy@example.com"]


class Invoice(TypedDict, total=False):
    amount_cents: int
    sent: Annotated[list, operator.add]
    recorded: bool


def mail(run_id: str, node: str, to: str, keyed: bool) -> str:
    params: resend.Emails.SendParams = {"from": "billing@example.com", "to": [to], "subject": "Your invoice",
                                        "html": "<p>Amount due: 42.00 EUR</p>"}
    options: resend.Emails.SendOptions = {"idempotency_key": f"{run_id}:{node}:{to}"} if keyed else {}
    return resend.Emails.send(params, options)["id"]


def build(saver: PostgresSaver, run_id: str, shape: str, keyed: bool):
    graph = StateGraph(Invoice)
    graph.add_node("plan", lambda s: {"amount_cents": 4200})
    graph.add_node("record", lambda s: {"recorded": True})
    graph.add_edge(START, "plan")
    graph.add_edge("record", END)
    if shape == "fan-in":
        graph.add_node("email", lambda s: {"sent": [mail(run_id, "email", CUSTOMERS[0], keyed)]})
        graph.add_node("copy", lambda s: {"sent": [mail(run_id, "copy", "books@example.com", keyed)]})
        graph.add_edge("plan", "email")
        graph.add_edge("plan", "copy")
        graph.add_edge(["email", "copy"], "record")
    else:
        graph.add_node("email", lambda arg: {"sent": [mail(run_id, "email", arg["to"], keyed)]})
        graph.add_conditional_edges("plan", lambda s: [Send("email", {"to": to}) for to in CUSTOMERS], ["email"])
        graph.add_edge("email", "record")
    return graph.compile(checkpointer=saver)


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-") or "--shape" not in argv[:-1]:
        print("usage: lg_parallel.py RUN_ID --shape fan-in|send [--keyed]", file=sys.stderr)
        return 2
    run_id, shape = argv[0], argv[argv.index("--shape") + 1]
    resend.api_key = os.environ.get("RESEND_API_KEY", "re_test")
    config = {"configurable": {"thread_id": run_id}}
    with PostgresSaver.from_conn_string(os.environ["DATABASE_URL"]) as saver:
        saver.setup()
        app = build(saver, run_id, shape, "--keyed" in argv)
        app.invoke({} if app.get_state(config).created_at is None else None, config, durability="sync")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
