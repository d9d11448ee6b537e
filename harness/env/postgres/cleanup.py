"""Everything a dead killpoint left on this machine, removed at once: its clusters (the reaper) and the
staging folders of a template build it did not finish (the template cache)."""

from __future__ import annotations

import contextlib

from killpoint.env.postgres.reaper import reap_orphans
from killpoint.env.postgres.template import reap_staging


def reap_all() -> list[str]:
    """Reap dead owners' clusters and dead builders' staging folders; the cluster folders reaped."""
    reaped = reap_orphans()
    with contextlib.suppress(OSError):
        reap_staging()
    return reaped
