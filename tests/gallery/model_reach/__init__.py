"""Step modules that reach the model client by different paths, or look as if they might and do not: what
`killpoint.reference_agent.model_calls.may_call_model` must tell apart (tests/reference_agent/test_model_calls.py,
tests/env/test_sdk_preload.py). Each plans with the model (or with a rule) and emails the plan."""
