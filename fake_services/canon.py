"""Canonical JSON and short digests: the one way the fakes fingerprint a payload.

Contract: ``canonical_json`` sorts keys and uses no insignificant whitespace, so two payloads that are
equal as JSON values give the same text, and ``digest`` of equal values is equal on every machine.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

DIGEST_LENGTH = 16


def canonical_json(value: Any) -> str:
    """The JSON text of ``value`` with sorted keys and compact separators."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def text_digest(text: str) -> str:
    """The sha256 hex digest (64 characters) of a text (e.g. a canonical JSON already made)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def full_digest(value: Any) -> str:
    """The sha256 hex digest (64 characters) of the canonical JSON of ``value``."""
    return text_digest(canonical_json(value))


def digest(value: Any, length: int = DIGEST_LENGTH) -> str:
    """A short (``length`` hex characters) sha256 digest of the canonical JSON of ``value``."""
    return full_digest(value)[:length]
