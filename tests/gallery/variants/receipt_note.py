"""A correct agent whose own table keeps a note that names the providers' ids inside free text ("charged
ch_... and mailed em_... for INV-..."): the ids are minted per run, so the notes of concurrent runs and of
the same runs done serially differ only there. killpoint must pass it in concurrent-runs."""

from __future__ import annotations

import psycopg

from killpoint.reference_agent import invoice_agent
from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, initial_state
from killpoint.reference_agent.runtime import Checkpoint
from tests.gallery.record_also import record_also

__all__ = ["MIGRATIONS", "OWN_EFFECTS_SQL", "SCHEMA_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]

SCHEMA_SQL = "CREATE TABLE IF NOT EXISTS receipt_notes (run_id text PRIMARY KEY, note text NOT NULL)"
OWN_EFFECTS_SQL = "SELECT note FROM receipt_notes WHERE run_id = %s"


def keep_note(cur: psycopg.Cursor, cp: Checkpoint) -> None:
    s = cp.state
    cur.execute("INSERT INTO receipt_notes (run_id, note) VALUES (%s, %s)",
                (cp.run_id, f"charged {s['charge_id']} and mailed {s['email_id']} for {s['invoice_id']}"))


STEPS = {**invoice_agent.STEPS, "record": record_also(keep_note)}
