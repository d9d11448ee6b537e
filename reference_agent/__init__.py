"""reference_agent: a small durable-agent runtime on Postgres and the reference invoice agent built on it.

It imports nothing else of killpoint. See README.md in this folder for the step-module contract, and
``python -m killpoint.reference_agent.worker`` for the worker process.
"""
