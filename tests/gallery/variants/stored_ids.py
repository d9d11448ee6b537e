"""A correct agent whose own table keeps the ids the providers issued: its invoice row holds the ledger's
charge id and the mailer's email id (a provider mints a new id for every run, `ch_...`, `em_...`). Runs done
concurrently and the same runs done one after another leave rows that differ only in those ids: killpoint
must compare them through the run's aliases and pass it in concurrent-runs (a false `same_as_serial` before)."""

from __future__ import annotations

import psycopg

from killpoint.reference_agent import invoice_agent
from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, initial_state
from killpoint.reference_agent.runtime import Checkpoint
from tests.gallery.record_also import record_also

__all__ = ["MIGRATIONS", "OWN_EFFECTS_SQL", "SCHEMA_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]

SCHEMA_SQL = ("CREATE TABLE IF NOT EXISTS receipts_kept (run_id text PRIMARY KEY, invoice_id text NOT NULL, "
              "charge_id text NOT NULL, email_id text NOT NULL)")
OWN_EFFECTS_SQL = "SELECT invoice_id, charge_id, email_id FROM receipts_kept WHERE run_id = %s"


def keep_ids(cur: psycopg.Cursor, cp: Checkpoint) -> None:
    s = cp.state
    cur.execute("INSERT INTO receipts_kept (run_id, invoice_id, charge_id, email_id) VALUES (%s, %s, %s, %s)",
                (cp.run_id, s["invoice_id"], s["charge_id"], s["email_id"]))


STEPS = {**invoice_agent.STEPS, "record": record_also(keep_ids)}
