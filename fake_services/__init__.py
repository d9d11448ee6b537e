"""killpoint's witnesses: fake mailer, ledger (+ webhook), Anthropic Messages, Stripe, Resend and OpenAI servers.

Real HTTP servers on 127.0.0.1 that record every attempt and every applied effect per run, so that a
checker can tell "retried but deduplicated" from "done twice". Imports nothing else of killpoint.
Standalone: ``python -m killpoint.fake_services mailer|ledger|model|stripe|resend|openai --port N``.
See README.md in this folder.
"""

from .admin import AdminClient
from .hooks import ACTIONS, POINTS, Decision, Hook
from .services import Services

__all__ = ["ACTIONS", "POINTS", "AdminClient", "Decision", "Hook", "Services"]
