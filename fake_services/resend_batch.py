"""``POST /emails/batch``: up to 100 emails in one request, each an effect, idempotent as a whole.

The flow of ``effects.py``, with one attempt for the request and one effect per email:

1. record the attempt (its digest is the whole batch's); refuse, with nothing applied: no API key (401),
   a body that is not a list of 1 to 100 emails, or any email failing the email's validation (422; Resend's
   default ``strict`` mode: the whole batch is refused);
2. faults at ``effect.received`` (nothing applied);
3. apply each email, keyed by ``<Idempotency-Key>#<index>`` when a key is given: a batch replayed with its
   key and the same emails gets the first answer again (``Idempotent-Replayed: true``, ``deduplicated``);
   the same key with other emails is 409 ``invalid_idempotent_request``;
4. faults at ``effect.applied`` (the emails stay sent);
5. ``{"data": [{"id": ...}, ...]}``, one id per email, in order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .canon import digest
from .effects import CONFLICT_MESSAGE, Dialect, EffectSpec, Problem, effect_id, finisher, has_bearer, info_for
from .wire import BadRequest, Reply, Request

MAX_BATCH = 100


def check_batch(payload: Any, validate: Callable[[Any], Problem | None]) -> Problem | None:
    if not isinstance(payload, list) or not 1 <= len(payload) <= MAX_BATCH:
        return Problem(f"The body must be a list of 1 to {MAX_BATCH} emails.")
    for index, email in enumerate(payload):
        problem = validate(email)
        if problem is not None:
            return Problem(f"emails[{index}]: {problem.message}", param=problem.param, code=problem.code)
    return None


def batch_endpoint(spec: EffectSpec, validate: Callable[[Any], Problem | None],
                   talk: Dialect) -> Callable[[Request], Reply]:
    """The endpoint serving a batch of ``spec``'s emails (see the module docstring)."""

    def serve(request: Request) -> Reply:
        journal = request.state.journal
        key = request.headers.get("idempotency-key")
        try:
            payload = request.json()
            problem = check_batch(payload, validate)
        except BadRequest as exc:
            payload, problem = None, Problem(exc.message)
        attempt = journal.begin(spec.service, request.run_id, key, digest(payload), request.route,
                                request.method)
        request.attempt = attempt
        order = attempt["order"]

        finish = finisher(journal, attempt)
        if not has_bearer(request.headers):
            return finish("rejected", talk.error("unauthenticated", "Missing API key in the authorization header.",
                                                 order))
        if problem is not None:
            return finish("rejected", talk.error("invalid", problem, order))
        info = info_for(request, attempt)
        decision = request.state.decide("effect.received", info)
        if decision.action == "drop":
            return finish("dropped", Reply.dropped())
        if decision.action != "go":
            kind = "overload" if decision.action == "overload" else "unavailable"
            return finish("injected-error", talk.error(kind, f"fake {spec.service}: injected {decision.action} "
                                                             "before applying", order))
        first = next((e for e in journal.effects_of(spec.service, request.run_id)
                      if key is not None and e["key"] == f"{key}#0"), None)
        if first is not None and first["payload_digest"] != attempt["payload_digest"]:  # before applying any
            return finish("rejected", talk.error("conflict", Problem(CONFLICT_MESSAGE), order))
        outcomes, effects = [], []
        for index, email in enumerate(payload):
            one = {**attempt, "key": f"{key}#{index}" if key is not None else None}

            def respond(seed: str, email: Any = email) -> tuple[str, dict[str, Any]]:
                new_id = effect_id(spec, request.run_id, seed)
                return new_id, spec.respond(email, new_id, None)

            kind, effect = journal.apply(one, email, True, respond)
            outcomes.append(kind)
            effects.append(effect)
        ids = [e["id"] for e in effects]
        body = {"data": [{"id": i} for i in ids]}
        if all(k == "deduplicated" for k in outcomes):
            return finish("deduplicated", talk.ok(body, order, effects[0]), effect_ids=ids)
        decision = request.state.decide("effect.applied", {**info, "effect_id": ids[0], "effect_ids": ids})
        if decision.action == "drop":
            return finish("dropped", Reply.dropped(), effect_ids=ids)
        if decision.action != "go":
            kind = "overload" if decision.action == "overload" else "failed"
            return finish("injected-error", talk.error(kind, f"fake {spec.service}: injected {decision.action} "
                                                             "after applying", order), effect_ids=ids)
        return finish("applied", talk.ok(body, order), effect_ids=ids)

    return serve
