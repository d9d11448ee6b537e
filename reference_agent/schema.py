"""The Postgres tables the runtime uses (contracts.md section 3), created idempotently."""

from __future__ import annotations

import psycopg

DDL = """
CREATE TABLE IF NOT EXISTS checkpoints (
  run_id     text PRIMARY KEY,
  seq        bigint NOT NULL,
  status     text NOT NULL,
  data       jsonb NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS leases (
  run_id     text PRIMARY KEY,
  owner      text NOT NULL,
  expires_at timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS jobs (
  id         text PRIMARY KEY,
  run_id     text NOT NULL,
  kind       text NOT NULL,
  state      text NOT NULL DEFAULT 'queued',
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS invoices (
  run_id       text NOT NULL,
  invoice_id   text NOT NULL,
  amount_cents bigint NOT NULL,
  PRIMARY KEY (run_id, invoice_id)
);
CREATE TABLE IF NOT EXISTS done_keys (
  key text PRIMARY KEY,
  at  timestamptz NOT NULL DEFAULT now()
);
"""

# CREATE TABLE IF NOT EXISTS is not safe against itself: two sessions creating the same table at once can
# both pass the existence check, and one fails on the catalog's unique index. A transaction-scoped advisory
# lock serialises the creators.
_LOCK_KEY = 0x6B696C6C706F696E  # "killpoin"


def ensure_schema(conn: psycopg.Connection) -> None:
    """Create the tables if they do not exist. Safe to call from several processes at once."""
    with conn.transaction(), conn.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        cur.execute(DDL)
