"""Agents that load and run but are wrong in one way, for the scenario and CLI tests (imported as
`tests.gallery.variants.<name>`).

Broken variants show a scenario fails when the property it guards is broken: a sweeper without the dedupe
job id (stalled-sweep), a store without the monotonic guard (zombie-worker), a webhook agent whose
downstream dedupes after all (non-idempotent-downstream: no window left to find), and so on; the fleet's
agent without idempotency keys is the mutant ``tests.gallery.mutants.no_key``. The runtime patches here
apply only inside a worker incarnation (``patching.in_worker``), unlike the mutants', which apply at import.

``no_email_key`` is the invoice agent whose email carries no idempotency key (a kill after the email
sends it twice); ``tiny_agent`` is a valid module that imports nothing heavy, for CLI tests that stop
before anything runs.
"""
