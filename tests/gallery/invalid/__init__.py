"""Step modules that break the step-module contract (or break durability), for the harness's own tests.

Each module is named after what is wrong with it; ``no_email_key`` is a whole agent that runs but is not
durable (its email carries no idempotency key), the rest are refused by ``killpoint.env.stepmodule.load``.
"""
