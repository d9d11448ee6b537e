"""BUG: a transactional outbox whose relay never marks a row sent: ``python outbox_never_marked.py RUN_ID``.

Each step with an effect writes its outbox row (the keyed request) in the same transaction as the step's
checkpoint, then sends it (with the ``Killpoint-Step`` header). On every start the relay sends every outbox
row of the run, as stored (path, body, key: no step header, so the services cannot tell which step they
belong to). The service deduplicates each by its key, so no effect happens twice, but every restart
re-sends every effect the run ever had: after one kill at the charge, the email is sent again too, a repeat
no fault explains, and each further incarnation re-sends them all again. Its look-alike
``outbox_marks_sent.py`` marks each row once the service has answered.
"""

from __future__ import annotations

import sys

from tests.gallery.blackbox import outbox


def main(run_id: str) -> int:
    with outbox.connect() as conn:
        outbox.ensure_outbox(conn)
        # BUG: every row is re-sent on every start, and none is ever marked sent (unsent_only=False, no
        # mark_sent): a row the service answered long ago is sent again after each restart
        for _n, url_var, path, body, key in outbox.rows(conn, run_id, unsent_only=False):
            outbox.send(url_var, path, body, key)
        data = outbox.load(conn, run_id)
        while data["cursor"] != "done":
            step = data["cursor"]
            with conn.transaction():
                row = outbox.enqueue(conn, run_id, step) if step in outbox.EFFECTS else None
                data = outbox.advance(conn, data, {**data["state"], step: True})
            if row is not None:
                _n, url_var, path, body, key = row
                outbox.send(url_var, path, body, key, step=step)
    return 0


if __name__ == "__main__":
    sys.exit(outbox.run(main))
