"""When a broken variant may patch the reference runtime: only inside a worker incarnation.

The harness imports a step module in its own process too (to check it against the contract); a patch
there would leak into everything else that process runs. A worker started by the harness has
`KILLPOINT_INCARNATION` set when it imports its step module (fork server children and `--spawn exec`
alike), so the patch lands there only. A variant preloaded into the fork server (the session's own
`--steps`) is imported before any incarnation exists and stays unpatched: use these through a scenario's
`steps`, as the scenario tests do.
"""

from __future__ import annotations

import os


def in_worker() -> bool:
    return bool(os.environ.get("KILLPOINT_INCARNATION"))
