"""Broken variants the scenario tests run to show each scenario fails when the property it guards is
broken: a sweeper without the dedupe job id (stalled-sweep), an agent without idempotency keys (fleet), a
webhook agent whose downstream dedupes after all (non-idempotent-downstream: no window left to find).

Step modules here are imported as `broken.<name>` (the tests folder is on PYTHONPATH, see
`helpers_harness.pythonpath`).
"""
