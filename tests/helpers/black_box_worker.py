"""The reference worker as a black box, for `--worker-cmd "python tests/helpers/black_box_worker.py {run_id}"`.

It runs `killpoint.reference_agent.worker` with `KILLPOINT_SOCKET` removed from its environment first, so it
reports no kill point of its own: the harness holds it only from outside (the fake services, the checkpoint
table's trigger), as it holds a worker in any language. Being the interpreter killpoint runs on running a
script, its incarnations are forked from servers that preloaded what this script imports at its top
(harness/env/pyfork_launcher.py), as a user's Python worker's are, instead of each importing the SDK afresh
(`env -u KILLPOINT_SOCKET python -m ...` was exec'd per incarnation: ~2 CPU-seconds each).
"""

from __future__ import annotations

import os
import sys

import anthropic  # noqa: F401 - imported by the worker's first model call; at the top, the servers preload it

import killpoint.reference_agent.worker as worker

if __name__ == "__main__":
    os.environ.pop("KILLPOINT_SOCKET", None)
    sys.exit(worker.main())
