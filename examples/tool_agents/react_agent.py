"""A support agent on LangGraph's prebuilt ReAct agent, as a LangGraph user writes it: GPT (through
``langchain-openai``) calls the tool ``email_customer``, which mails the customer with Resend's own SDK;
the graph is checkpointed by PostgresSaver. Nothing in it knows killpoint.

    python react_agent.py RUN_ID [--keyed]

starts the run ``RUN_ID`` (the graph's thread id) or, if the thread has a checkpoint, resumes it where it
stopped. The ReAct loop is two nodes, ``agent`` (the model) and ``tools`` (the tool calls the model made):
killed after Resend sent the email and before LangGraph checkpointed the ``tools`` node, a resume runs the
tool call again, the same call with the same ``tool_call_id`` (it comes from the checkpointed ``agent``
node). Without ``--keyed`` the email is sent bare, and the customer gets it twice. With ``--keyed`` it
carries the idempotency key ``RUN_ID:tools:<tool_call_id>``, and Resend answers the repeat with the first
email; and the graph is checkpointed by ``MonotonicPostgresSaver`` (monotonic_saver.py), whose checkpoint ids
never sort below the thread's latest, so a worker whose clock is behind the last writer's still resumes
where the thread stopped (PostgresSaver loads the greatest id, and LangGraph's ids come from the clock).

Environment: DATABASE_URL (Postgres), OPENAI_BASE_URL and OPENAI_API_KEY (read by the openai SDK under
``ChatOpenAI``), RESEND_API_KEY and RESEND_API_URL (the resend SDK reads it at import). Under killpoint
(docs/tools.md):

    killpoint run --adapter langgraph --worker-cmd 'python examples/tool_agents/react_agent.py {run_id} --keyed'
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import psycopg
import resend
from langchain_core.tools import InjectedToolCallId, tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.prebuilt import create_react_agent
from monotonic_saver import MonotonicPostgresSaver

CUSTOMERS = {"A-17": "ada@example.com"}


def build(saver: PostgresSaver, run_id: str, keyed: bool):
    @tool
    def email_customer(order_id: str, message: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Email the customer of an order. Returns the email's id."""
        params: resend.Emails.SendParams = {
            "from": "support@example.com", "to": [CUSTOMERS.get(order_id, "orders@example.com")],
            "subject": f"About your order {order_id}", "html": f"<p>{message}</p>",
        }
        options: resend.Emails.SendOptions = {"idempotency_key": f"{run_id}:tools:{tool_call_id}"} if keyed else {}
        return "sent as " + resend.Emails.send(params, options)["id"]

    model = ChatOpenAI(model="gpt-4o-mini", max_retries=3)
    # version="v1": the tool calls of a turn run in the one node `tools`, scheduled by a conditional edge
    # (`branch:to:tools`), which killpoint's langgraph adapter reads as the step in progress; "v2" sends
    # each call as a task of its own (`Send`), which it does not read yet.
    return create_react_agent(model, [email_customer], checkpointer=saver, version="v1",
                              prompt="You answer customers. Tell them what happened with email_customer.")


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print("usage: react_agent.py RUN_ID [--keyed]", file=sys.stderr)
        return 2
    run_id, keyed = argv[0], "--keyed" in argv[1:]
    resend.api_key = os.environ.get("RESEND_API_KEY", "re_test")
    config = {"configurable": {"thread_id": run_id}}
    # One live worker per thread (LangGraph has no lease or fencing; examples/langgraph/invoice_graph.py
    # says why): a second worker waits for the first to finish or die, then resumes the thread.
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as lock:
        lock.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (f"react_agent:{run_id}",))
        saver_type = MonotonicPostgresSaver if keyed else PostgresSaver
        with saver_type.from_conn_string(os.environ["DATABASE_URL"]) as saver:
            saver.setup()
            agent = build(saver, run_id, keyed)
            if agent.get_state(config).created_at is None:  # a new run
                question = {"role": "user", "content": "My refund for order A-17: please tell me when it is sent."}
                agent.invoke({"messages": [question]}, config, durability="sync")
            else:  # resume from the last checkpoint (a finished thread has nothing left to run)
                agent.invoke(None, config, durability="sync")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
