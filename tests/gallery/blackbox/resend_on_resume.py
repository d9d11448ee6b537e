"""BUG: a worker that, on resume, re-sends every earlier step's effect "to be safe" before going on from its
checkpoint: ``python resend_on_resume.py RUN_ID``.

Each step with an effect sends it (keyed, with the ``Killpoint-Step`` header) and then writes its
checkpoint, so a kill between the two is covered by the key. But when the worker starts on a run that has
a checkpoint past the first (a resume), it first re-sends, keyed as before but with no step header (the
services cannot tell which step they belong to), the effect of every step before its cursor: each one was
already applied and checkpointed, so each is a repeat the crash cannot explain (the service deduplicates
them, so no effect happens twice; the work is done again on every restart, growing with the run).
"""

from __future__ import annotations

import sys

from tests.gallery.blackbox import outbox


def main(run_id: str) -> int:
    with outbox.connect() as conn:
        data = outbox.load(conn, run_id)
        if data["seq"] > 0 and data["cursor"] != "done":
            # BUG: "to be safe" re-sends the effects of steps whose checkpoint already committed (the
            # checkpoint proves they were answered): only the step at the cursor may need its request again
            for step in outbox.STEPS[:outbox.STEPS.index(data["cursor"])]:
                if step in outbox.EFFECTS:
                    url_var, path, body = outbox.EFFECTS[step]
                    outbox.send(url_var, path, body, outbox.key_of(run_id, outbox.STEPS.index(step)))
        while data["cursor"] != "done":
            step = data["cursor"]
            if step in outbox.EFFECTS:
                url_var, path, body = outbox.EFFECTS[step]
                outbox.send(url_var, path, body, outbox.key_of(run_id, outbox.STEPS.index(step)), step=step)
            data = outbox.advance(conn, data, {**data["state"], step: True})
    return 0


if __name__ == "__main__":
    sys.exit(outbox.run(main))
