"""Acme's refund agent, written as a killpoint step module.

- ``acme_refunds.steps``: the agent (``decide -> refund -> notify -> record -> done``).
- ``acme_refunds.keyless``: a deliberately broken copy whose refund gets a new idempotency key per attempt.
- ``acme_refunds.crashy``: a deliberately broken copy whose ``notify`` raises ``KeyError``.

Crash-test it with ``killpoint run --steps acme_refunds.steps`` (see README.md).
"""
