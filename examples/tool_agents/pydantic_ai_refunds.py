"""A refund agent on Pydantic AI, made durable by its DBOS integration, as a Pydantic AI user writes it: the
model (Claude, through Pydantic AI's Anthropic model) calls the tool ``issue_refund``, and the tool pays the
refund out through a ledger's HTTP API. Nothing in it knows killpoint.

    python pydantic_ai_refunds.py RUN_ID [--keyed] [--fail-workflow]

starts the workflow ``RUN_ID`` (its DBOS workflow id and executor id) or, if DBOS has it already, lets DBOS
recover it from its last recorded step; a finished workflow returns its recorded result. The model
requests are DBOS steps (``DBOSDurability``), so a recovered run gets the model's recorded answer, the same
tool call with the same ``tool_call_id``, and runs the tool again. Without ``--keyed`` the payout carries
no idempotency key: killed after the ledger paid and before DBOS recorded the next step, the recovery pays a
second time. With ``--keyed`` it carries ``refund:RUN_ID:<tool_call_id>`` (not ``RUN_ID:...``, which
killpoint would read as naming a step), and the ledger answers the repeat with the first payout.

A model or ledger outage is transient: the model's client and the tool retry it a few times (the tool with
the same key), then take the process down (exit 1) before DBOS records anything, so the workflow stays
PENDING and DBOS resumes it from its last recorded step when the worker next starts (as a supervisor restarts
it). The error must not reach DBOS: DBOS records a step's exception as its output and a workflow that raises
as ERROR, for good (never recovered), so one 5xx past the retries would end the refund unpaid
(examples/dbos/invoice_workflow.py does the same for its email). ``--fail-workflow`` is that mistake, kept to
show it is found: the errors reach DBOS, and killpoint's flaky-services fails the run (``completes``: the
run ended failed).

The workflow is synchronous (``agent.run_sync``): at launch DBOS resumes the pending workflows of its
executor id, and an ``async`` workflow awaiting ``agent.run`` hung when resumed that way (Pydantic AI 2.68,
DBOS 3.4).

Environment: DATABASE_URL (DBOS's system database), ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY (the model),
LEDGER_URL (the ledger). Under killpoint (docs/tools.md):

    killpoint run --adapter dbos --worker-cmd 'python examples/tool_agents/pydantic_ai_refunds.py {run_id} --keyed'
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import NoReturn

import httpx
from dbos import DBOS, DBOSConfig, SetWorkflowID
from pydantic_ai import Agent, RunContext
from pydantic_ai.durable_exec.dbos import DBOSDurability
from pydantic_ai.exceptions import (
    ModelConnectionError,
    ModelRateLimitError,
    ModelServerError,
    ModelUnavailableError,
)
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.settings import ModelSettings

KEYED = "--keyed" in sys.argv[2:]
FAIL_WORKFLOW = "--fail-workflow" in sys.argv[2:]
RUN_ID = sys.argv[1] if len(sys.argv) > 1 else ""
ATTEMPTS, FIRST_WAIT = 4, 0.2  # the ledger: 0.2 + 0.4 + 0.8 s between the attempts
TRANSIENT_MODEL_ERRORS = (ModelRateLimitError, ModelUnavailableError, ModelServerError, ModelConnectionError)


def exit_for_recovery(what: str, exc: BaseException) -> NoReturn:
    """Take the process down before DBOS records the error: the workflow stays PENDING, and the next start
    of the worker resumes it from its last recorded step."""
    print(f"{what} still failing after its retries ({exc!r}): exiting, the workflow stays pending and "
          "resumes at the next start", file=sys.stderr, flush=True)
    os._exit(1)


class ExitOnOutage(WrapperModel):
    """The model, whose transient errors (5xx, 429, a lost connection: the Anthropic client has retried them
    already) end the process instead of the DBOS model-request step."""

    async def request(self, messages: list[ModelMessage], model_settings: ModelSettings | None,
                      model_request_parameters: ModelRequestParameters) -> ModelResponse:
        try:
            return await super().request(messages, model_settings, model_request_parameters)
        except TRANSIENT_MODEL_ERRORS as exc:
            exit_for_recovery("the model", exc)


model = AnthropicModel("claude-haiku-4-5", provider=AnthropicProvider(
    base_url=os.environ.get("ANTHROPIC_BASE_URL"), api_key=os.environ.get("ANTHROPIC_API_KEY", "unset")))
agent = Agent(model if FAIL_WORKFLOW else ExitOnOutage(model), name="refunds", capabilities=[DBOSDurability()],
              instructions="You handle refund requests. Refund an order with the issue_refund tool.")


def transient(exc: Exception) -> bool:
    """A 5xx, a rate limit (429) or a broken connection: the ledger may answer later. A 4xx will not."""
    if isinstance(exc, httpx.HTTPStatusError):
        code = exc.response.status_code
        return code >= 500 or code == 429
    return isinstance(exc, httpx.TransportError)


@agent.tool
async def issue_refund(ctx: RunContext[None], order_id: str, amount_cents: int) -> str:
    """Refund an order: pay `amount_cents` back to the customer of `order_id`. Returns the payout id."""
    headers = {"Idempotency-Key": f"refund:{DBOS.workflow_id}:{ctx.tool_call_id}"} if KEYED else {}
    for attempt in range(1 if FAIL_WORKFLOW else ATTEMPTS):
        try:
            async with httpx.AsyncClient(timeout=30) as client:
                paid = await client.post(os.environ["LEDGER_URL"] + "/v1/charges", headers=headers,
                                         json={"account": order_id, "amount_cents": amount_cents, "currency": "usd"})
            paid.raise_for_status()
            return f"refunded as {paid.json()['id']}"
        except httpx.HTTPError as exc:
            if FAIL_WORKFLOW or not transient(exc):
                raise  # refused for good (or --fail-workflow): the workflow fails
            if attempt + 1 == ATTEMPTS:
                exit_for_recovery("the ledger", exc)
            await asyncio.sleep(FIRST_WAIT * 2 ** attempt)
    raise AssertionError("unreachable")


@DBOS.workflow()
def refund_workflow(message: str) -> str:
    return agent.run_sync(message).output


def main() -> int:
    if not RUN_ID or RUN_ID.startswith("-"):
        print("usage: pydantic_ai_refunds.py RUN_ID [--keyed] [--fail-workflow]", file=sys.stderr)
        return 2
    config: DBOSConfig = {"name": "refunds", "system_database_url": os.environ["DATABASE_URL"],
                          "executor_id": RUN_ID, "application_version": "1"}
    DBOS(config=config)
    DBOS.launch()
    try:
        with SetWorkflowID(RUN_ID):
            refund_workflow("Order A-17 arrived broken. Please refund the 42.00 USD.")
    finally:
        DBOS.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
