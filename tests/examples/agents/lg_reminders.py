"""A LangGraph graph that loops over a node: `remind` runs once per customer (a conditional edge back to
itself), each pass sending one reminder with Resend's SDK under the key `RUN_ID:remind:<i>` (`i` the
customer's index, kept in the graph's state), PostgresSaver, `durability="sync"`:

    python lg_reminders.py RUN_ID [--cc-manager]

Plain, it is correct and must pass. `--cc-manager`: from the second pass on (the follow-ups), `remind` also
copies the account manager, without a key; a kill after that copy and before the pass's checkpoint sends
it again. Faults in the first pass, or between passes, never show it: only a fault inside a later pass of
`remind` (`@2`, `@3`) does.
"""

from __future__ import annotations

import os
import sys
from typing import TypedDict

import resend
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import END, START, StateGraph

CUSTOMERS = ["ada@example.com", "bob@example.com", "cy@example.com"]
MANAGER = "accounts@example.com"


class Reminders(TypedDict, total=False):
    i: int
    sent: list[str]


def email(to: str, subject: str) -> resend.Emails.SendParams:
    return {"from": "billing@example.com", "to": [to], "subject": subject, "html": "<p>Your invoice is due.</p>"}


def build(saver: PostgresSaver, run_id: str, cc_manager: bool):
    def remind(state: Reminders) -> Reminders:
        i = state.get("i", 0)
        sent = resend.Emails.send(email(CUSTOMERS[i], "A reminder"), {"idempotency_key": f"{run_id}:remind:{i}"})
        if cc_manager and i > 0:  # the BUG: a follow-up's copy without a key
            resend.Emails.send(email(MANAGER, f"Follow-up {i} sent to {CUSTOMERS[i]}"))
        return {"i": i + 1, "sent": [*state.get("sent", []), sent["id"]]}

    graph = StateGraph(Reminders)
    graph.add_node("remind", remind)
    graph.add_node("close", lambda s: {})
    graph.add_edge(START, "remind")
    graph.add_conditional_edges("remind", lambda s: "remind" if s["i"] < len(CUSTOMERS) else "close",
                                ["remind", "close"])
    graph.add_edge("close", END)
    return graph.compile(checkpointer=saver)


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print("usage: lg_reminders.py RUN_ID [--cc-manager]", file=sys.stderr)
        return 2
    run_id = argv[0]
    resend.api_key = os.environ.get("RESEND_API_KEY", "re_test")
    config = {"configurable": {"thread_id": run_id}}
    with PostgresSaver.from_conn_string(os.environ["DATABASE_URL"]) as saver:
        saver.setup()
        app = build(saver, run_id, "--cc-manager" in argv)
        start = {} if app.get_state(config).created_at is None else None
        app.invoke(start, config, durability="sync")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
