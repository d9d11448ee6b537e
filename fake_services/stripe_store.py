"""What the fake Stripe holds for a run: every object as it stands now, read from the journal (no state of its own).

Contract:

- A run's objects are its seed (:func:`seeded`, the same for every run) overlaid by the responses of its
  Stripe effects in arrival order: each response is an object (a created one, or one an action changed:
  a confirmed intent, an updated customer, a canceled refund), and the latest response for an id is that
  object's state. Nothing else is kept, so a run's reset forgets its objects and a replayed effect
  (deduplicated) changes nothing.
- A PaymentIntent with ``latest_charge`` brings its charge (``stripe_objects.charge_of``); every charge
  shows the refunds that name it and are not canceled (``amount_refunded``, ``refunded``).
- Objects are listed newest first (the seed counts as oldest), as Stripe lists them.

The seed: ``KILLPOINT_STRIPE_SEED`` in the environment of the process running the fakes (the harness, or
``python -m killpoint.fake_services stripe``) holds JSON, or ``@`` and the path of a JSON file::

    {"customers": [{"id": "cus_alice", "email": "alice@example.com", "name": "Alice"}],
     "charges": [{"id": "ch_old", "amount": 5000, "currency": "usd", "customer": "cus_alice"}],
     "payment_intents": [{"id": "pi_old", "amount": 5000, "currency": "usd", "payment_method": "pm_card_visa",
                          "confirm": true}]}

Each entry takes the parameters its ``POST`` takes, and an ``id``; seeded objects exist in every run, are
no effects, and are read again when the variable changes (a step module's ``setup(conn)`` may set it: it
runs in the harness's process before the fakes start). A seed that is not valid raises ``ValueError``
naming the variable, answered as a 500 by the fake.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from . import stripe_objects as so

SEED_VAR = "KILLPOINT_STRIPE_SEED"
SERVICE = "stripe"
BUILDERS = {"customers": so.customer, "charges": so.charge, "payment_intents": so.payment_intent}

_seed_lock = threading.Lock()
_seed_cache: tuple[str, list[dict[str, Any]]] | None = None


def seeded() -> list[dict[str, Any]]:
    """The seeded objects (``KILLPOINT_STRIPE_SEED``), oldest first; ``[]`` when it is unset."""
    global _seed_cache
    text = os.environ.get(SEED_VAR, "")
    with _seed_lock:
        if _seed_cache is None or _seed_cache[0] != text:
            _seed_cache = (text, _build_seed(text))
        return _seed_cache[1]


def _build_seed(text: str) -> list[dict[str, Any]]:
    if not text.strip():
        return []
    try:
        raw = json.loads(Path(text[1:]).read_text() if text.startswith("@") else text)
        objects = []
        for kind, entries in raw.items():
            build = BUILDERS[kind]
            for entry in entries:
                params = {k: (str(v).lower() if isinstance(v, bool) else v) for k, v in entry.items()}
                objects.append(build(params, str(params.pop("id"))))
        return objects
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{SEED_VAR} is not a valid seed ({type(exc).__name__}: {exc}); expected JSON "
                         f"{{{', '.join(map(repr, BUILDERS))}: [{{\"id\": ..., params}}]}} or @file") from None


class Store:
    """The objects of one run as they stand (see the module docstring); built per request."""

    def __init__(self, responses: list[dict[str, Any]], keys: set[str]) -> None:
        self.keys = keys
        """The idempotency keys of the run's Stripe effects (a seen key is a replay: no rule applies)."""
        self._objects: dict[str, dict[str, Any]] = {}  # in order of first appearance
        for obj in [*seeded(), *responses]:
            self._objects[obj["id"]] = obj
            if obj["object"] == "payment_intent" and obj.get("latest_charge"):
                self._objects[obj["latest_charge"]] = so.charge_of(obj)
        refunded: dict[str, int] = {}
        for obj in self._objects.values():
            if obj["object"] == "refund" and obj["status"] not in ("canceled", "failed"):
                refunded[obj["charge"]] = refunded.get(obj["charge"], 0) + obj["amount"]
        for obj in list(self._objects.values()):
            if obj["object"] == "charge":
                self._objects[obj["id"]] = so.with_refunds(obj, refunded.get(obj["id"], 0))

    @classmethod
    def of(cls, journal: Any, run_id: str) -> Store:
        effects = journal.effects_of(SERVICE, run_id)
        return cls([e["response"] for e in effects], {e["key"] for e in effects if e["key"] is not None})

    def get(self, kind: str, object_id: Any) -> dict[str, Any] | None:
        """The object of ``kind`` with that id, or None."""
        found = self._objects.get(str(object_id))
        return found if found is not None and found["object"] == kind else None

    def all(self, kind: str) -> list[dict[str, Any]]:
        """Every object of ``kind``, newest first."""
        return [o for o in reversed(self._objects.values()) if o["object"] == kind]
