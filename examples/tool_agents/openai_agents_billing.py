"""A billing agent on the OpenAI Agents SDK, crash-tested as a killpoint step module: the agent (GPT, through
the SDK's Responses model) calls the tool ``charge_card``, which charges the customer with Stripe's own SDK.

    PYTHONPATH=examples/tool_agents killpoint run --steps openai_agents_billing

Flow: one durable step, ``bill``, around ``Runner.run_sync``, the SDK's whole tool loop (the model calls
``charge_card``, the SDK runs it and sends its result back, the model answers), then ``done``. The step's
checkpoint keeps the conversation (``result.to_input_list()``) and the answer. A worker killed inside the
step (after Stripe charged the card and before the checkpoint) runs the step again: the model is asked the
same question and, its answer a function of the request, calls ``charge_card`` with the same
``tool_call_id``. The charge is keyed with the run id and that id (``RUN_ID:<tool_call_id>``), so Stripe
answers the repeat with the first PaymentIntent. ``openai_agents_billing_keyless`` is the same agent whose
charge carries no key: the card is charged twice, and ``exactly_once`` says so.

Environment (killpoint sets it): OPENAI_BASE_URL / OPENAI_API_KEY (the model), STRIPE_BASE_URL /
STRIPE_API_KEY (the card), each URL with the run's ``{run_id}`` slot. The SDK's tracing is turned off: it
would export to OpenAI's servers.
"""

from __future__ import annotations

import os
from typing import Any

import stripe
from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
from agents.tool_context import ToolContext
from openai import AsyncOpenAI

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from killpoint.reference_agent.context import for_run
from killpoint.reference_agent.pricing import cost_usd

MODEL = "gpt-4o-mini"
START = "bill"
STATE_VERSION = 1
QUESTION = "Order A-17: the customer approved the 125.00 USD repair. Charge their card on file."
MODEL_SCRIPT = [  # what the fake model answers (docs/tools.md): charge 125.00 for A-17, then say so
    {"when": {"tool": "charge_card"},
     "then": [{"call": "charge_card", "arguments": {"order_id": "A-17", "amount_cents": 12500}},
              {"say": "Charged 125.00 USD for order A-17."}]},
]

set_tracing_disabled(True)


def initial_state(params: dict[str, Any]) -> dict[str, Any]:
    return {"conversation": None, "answer": None}


def build(run_id: str, keyed: bool) -> Agent:
    """The agent of run ``run_id``: its model and its Stripe client on the run's fakes."""
    model = OpenAIResponsesModel(MODEL, AsyncOpenAI(base_url=for_run(os.environ["OPENAI_BASE_URL"], run_id),
                                                    api_key=os.environ["OPENAI_API_KEY"], max_retries=3))
    client = stripe.StripeClient(os.environ["STRIPE_API_KEY"], max_network_retries=3,
                                 base_addresses={"api": for_run(os.environ["STRIPE_BASE_URL"], run_id)})

    # failure_error_function=None: a charge that fails (Stripe down past the client's retries) raises, so the
    # step fails and is resumed; the SDK's default hands the model "An error occurred" and the run ends
    # uncharged, which killpoint's outage schedules find (exactly_once: "missing x1: stripe").
    @function_tool(failure_error_function=None)
    def charge_card(ctx: ToolContext[Any], order_id: str, amount_cents: int) -> str:
        """Charge the card on file of an order's customer, in cents. Returns the payment's id."""
        options: Any = {"idempotency_key": f"{run_id}:{ctx.tool_call_id}"} if keyed else {}
        intent = client.v1.payment_intents.create(
            params={"amount": amount_cents, "currency": "usd", "confirm": True, "payment_method": "pm_card_visa",
                    "metadata": {"order": order_id}}, options=options)
        return f"charged as {intent.id}"

    return Agent(name="billing", model=model, tools=[charge_card],
                 instructions="You bill customers. Charge a card only with charge_card.")


def run_bill(cp: Checkpoint, ctx: StepContext, keyed: bool) -> StepResult:
    """The step: the agent's whole tool loop, from the start of the conversation."""
    result = Runner.run_sync(build(cp.run_id, keyed), QUESTION, max_turns=4)
    ctx.point("effect.responded")
    return StepResult("done", {"conversation": result.to_input_list(), "answer": str(result.final_output)},
                      cost_usd=cost_usd(MODEL, result.context_wrapper.usage))


def bill(cp: Checkpoint, ctx: StepContext) -> StepResult:
    return run_bill(cp, ctx, keyed=True)


STEPS = {"bill": bill}
