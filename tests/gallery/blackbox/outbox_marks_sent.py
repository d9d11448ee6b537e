"""CORRECT: a transactional outbox whose relay marks each row sent as soon as the service answers:
``python outbox_marks_sent.py RUN_ID``.

Each step with an effect writes its outbox row (the keyed request) in the same transaction as the step's
checkpoint, then sends it (with the ``Killpoint-Step`` header: the step's own code knows its step) and marks
the row sent. On every start the relay first sends the rows not yet marked, as stored (path, body, key: no
step header, so the services cannot tell which step they belong to), marking each. A kill between a send
and its mark costs exactly one keyed repeat, which the service deduplicates: one per fault. It looks like
``outbox_never_marked.py`` and must PASS where that one FAILs (tests/checkers/test_unclaimed_rework.py).

Its checkpoint write is a compare-and-set on seq (`outbox.advance`): a frozen worker thawed after its
successor moved the run on writes nothing and exits 3 (fenced), so it passes zombie-worker too.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from tests.gallery.blackbox import outbox


def main(run_id: str, check: Callable[[str, dict], object] = lambda path, body: None) -> int:
    """The run; `check(path, body)` sees each effect before it is sent (typed_effects.py's types)."""
    with outbox.connect() as conn:
        outbox.ensure_outbox(conn)
        for n, url_var, path, body, key in outbox.rows(conn, run_id, unsent_only=True):
            check(path, body)
            outbox.send(url_var, path, body, key)
            outbox.mark_sent(conn, run_id, n)
        data = outbox.load(conn, run_id)
        while data["cursor"] != "done":
            step = data["cursor"]
            with conn.transaction():
                row = outbox.enqueue(conn, run_id, step) if step in outbox.EFFECTS else None
                data = outbox.advance(conn, data, {**data["state"], step: True})
            if row is not None:
                n, url_var, path, body, key = row
                check(path, body)
                outbox.send(url_var, path, body, key, step=step)
                outbox.mark_sent(conn, run_id, n)
    return 0


if __name__ == "__main__":
    sys.exit(outbox.run(main))
