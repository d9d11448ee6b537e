"""The credentials real SDKs read from the environment, kept away from every worker.

A crash test replays an agent's steps hundreds of times: a worker that found the user's real API key in
its environment, and an SDK that was not pointed at a fake, would send real mail, move real money or spend
on a real model each time. So no worker, and no fork server while it imports the agent, sees the shell's
value of any variable below: each is removed, and the ones killpoint has a fake for are set to a fake key
(the base-URL variables that point the SDKs at the fakes are set by `worker_env`).

1. `SECRET_VARS`: the variables, by exact name, that hold a credential (or name a file that does).
2. `SECRET_PREFIXES`: families whose every variable is a provider's setting (`POSTMARK_*`, `TWILIO_*`).
3. `FAKE_KEYS`: the fake value each SDK served by a fake gets instead (contracts.md section 2).
4. `NEUTRAL`: variables set so an SDK finds no credential file of the user's either (AWS's shared files).
5. `scrubbed(env)`: a copy of `env` without 1 and 2, with 3 and 4 set.
6. `hidden()`: for the block, the harness's own `os.environ` is scrubbed the same way (the child that
   checks a step module inherits it, and the harness imports the module itself where it must call it,
   `killpoint.env.stepmodule`); put back after.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

SECRET_VARS = frozenset({
    "OPENAI_API_KEY", "OPENAI_ORG_ID", "OPENAI_ORGANIZATION", "OPENAI_PROJECT_ID", "OPENAI_ADMIN_KEY",
    "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN", "AZURE_API_KEY", "AZURE_CLIENT_SECRET",
    "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN",
    "RESEND_API_KEY",
    "STRIPE_API_KEY", "STRIPE_SECRET_KEY", "STRIPE_WEBHOOK_SECRET",
    "SENDGRID_API_KEY", "MAILGUN_API_KEY",
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE", "AWS_BEARER_TOKEN_BEDROCK", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_API_KEY", "GEMINI_API_KEY",
    "MISTRAL_API_KEY", "COHERE_API_KEY", "CO_API_KEY", "GROQ_API_KEY", "TOGETHER_API_KEY",
    "FIREWORKS_API_KEY", "DEEPSEEK_API_KEY", "XAI_API_KEY", "PERPLEXITY_API_KEY", "OPENROUTER_API_KEY",
    "REPLICATE_API_TOKEN", "VOYAGE_API_KEY",
    "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACEHUB_API_TOKEN",
    "LANGCHAIN_API_KEY", "LANGSMITH_API_KEY",
    "SLACK_BOT_TOKEN", "SLACK_WEBHOOK_URL", "GITHUB_TOKEN", "GH_TOKEN",
})
"""Credential variables by exact name (docs/contracts.md, "Nothing leaves the machine")."""

SECRET_PREFIXES = ("POSTMARK_", "TWILIO_")
"""Variable families that are a provider's credentials and settings as a whole."""

FAKE_KEYS: dict[str, str] = {
    "ANTHROPIC_API_KEY": "killpoint-fake-key",
    "OPENAI_API_KEY": "sk-killpoint",
    "RESEND_API_KEY": "re_killpoint",
    "STRIPE_API_KEY": "sk_test_killpoint",
    "STRIPE_SECRET_KEY": "sk_test_killpoint",
}
"""The fake key of each SDK killpoint serves a fake for (its base-URL variable points at that fake)."""

NEUTRAL: dict[str, str] = {
    "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
    "AWS_CONFIG_FILE": "/dev/null",
    "AWS_EC2_METADATA_DISABLED": "true",
}
"""Set so that an SDK that found no credential variable finds no credential file or endpoint either."""


def is_secret(name: str) -> bool:
    """True if `name` is a credential variable of `SECRET_VARS` or `SECRET_PREFIXES`."""
    return name in SECRET_VARS or name.startswith(SECRET_PREFIXES)


def scrubbed(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of `env` without any credential variable, with the fake keys and `NEUTRAL` set."""
    out = {k: v for k, v in env.items() if not is_secret(k)}
    out.update(FAKE_KEYS)
    out.update(NEUTRAL)
    return out


@contextmanager
def hidden() -> Iterator[None]:
    """Within: `os.environ` is `scrubbed(os.environ)`; after: exactly what it was (a variable the block
    set or changed is put back too)."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(scrubbed(saved))
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
