"""A fake-service hook that lets every request go and records what it was told (tests of the hook's info)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from killpoint.fake_services import Decision


def recording_hook() -> tuple[Callable[[str, dict], Decision], list[dict]]:
    """`(hook, seen)`: the hook answers GO and appends `{"point": point, **info}` to `seen` (thread-safe: the
    fakes call it from each request's thread)."""
    seen: list[dict] = []
    lock = threading.Lock()

    def hook(point: str, info: dict) -> Decision:
        with lock:
            seen.append({"point": point, **info})
        return Decision.GO

    return hook, seen
