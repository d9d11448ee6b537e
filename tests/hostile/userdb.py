"""A user's database for the hostile suite: tables in the contract's shape (and one of another shape) holding
the user's own rows, and a digest of everything in it, to show killpoint left it byte-identical.

``fill(dsn)`` creates the user's objects; ``snapshot(dsn)`` returns every non-system schema, relation,
trigger, function and sequence value, and an md5 of every user table's rows in order. Two snapshots are
equal exactly when killpoint neither changed a row of the user's nor left an object behind.
"""

from __future__ import annotations

import psycopg
from psycopg import sql

USER_DDL = """
CREATE TABLE checkpoints (run_id text PRIMARY KEY, seq bigint NOT NULL, status text NOT NULL, data jsonb NOT NULL,
                          updated_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE leases (run_id text PRIMARY KEY, owner text NOT NULL, expires_at timestamptz NOT NULL);
CREATE TABLE jobs (id text PRIMARY KEY, run_id text NOT NULL, kind text NOT NULL, state text NOT NULL DEFAULT 'queued',
                   created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE invoices (run_id text NOT NULL, invoice_id text NOT NULL, amount_cents bigint NOT NULL,
                       PRIMARY KEY (run_id, invoice_id));
CREATE TABLE done_keys (key text PRIMARY KEY, at timestamptz NOT NULL DEFAULT now());
CREATE TABLE orders (id bigserial PRIMARY KEY, customer text NOT NULL, total_cents bigint NOT NULL);
-- the user's paused run, with an expired lease, and the ids killpoint itself uses for its own runs
INSERT INTO checkpoints VALUES
  ('user-run-1', 3, 'paused', '{"cursor": "email", "v": 1}', '2020-01-01T00:00:00Z'),
  ('baseline-1', 1, 'running', '{"cursor": "plan", "v": 1}', '2020-01-01T00:00:00Z'),
  ('run-1', 2, 'running', '{"cursor": "charge", "v": 1}', '2020-01-01T00:00:00Z');
INSERT INTO leases VALUES ('user-run-1', 'someone:1', '2020-01-01T00:00:00Z');
INSERT INTO jobs (id, run_id, kind, created_at) VALUES
  ('resume-user-run-1', 'user-run-1', 'resume', '2020-01-01T00:00:00Z'),
  ('user-job-2', 'user-run-2', 'resume', '2020-01-01T00:00:01Z');
INSERT INTO invoices VALUES ('user-run-1', 'INV-1', 1999);
INSERT INTO done_keys VALUES ('user-run-1:email', '2020-01-01T00:00:00Z');
INSERT INTO orders (customer, total_cents) VALUES ('ada', 1200), ('bob', 300);
"""

OTHER_SHAPE_DDL = """
CREATE TABLE checkpoints (id serial PRIMARY KEY, note text NOT NULL);
INSERT INTO checkpoints (note) VALUES ('the user''s own table of another shape');
"""


def fill(dsn: str, ddl: str = USER_DDL) -> None:
    """Create the user's tables and rows in ``public``."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(ddl)  # type: ignore[arg-type]


def snapshot(dsn: str) -> dict[str, object]:
    """Every object outside the system schemas, and a digest of every table's rows (see the module doc)."""
    system = "('pg_catalog', 'information_schema', 'pg_toast')"
    with psycopg.connect(dsn, autocommit=True) as conn:
        out: dict[str, object] = {
            "schemas": conn.execute(f"SELECT nspname FROM pg_namespace WHERE nspname NOT IN {system} "
                                    "AND nspname NOT LIKE 'pg_temp%' AND nspname NOT LIKE 'pg_toast%' "
                                    "ORDER BY 1").fetchall(),
            "relations": conn.execute(f"SELECT n.nspname, c.relname, c.relkind FROM pg_class c JOIN pg_namespace n "
                                      f"ON n.oid = c.relnamespace WHERE n.nspname NOT IN {system} "
                                      "AND n.nspname NOT LIKE 'pg_temp%' AND n.nspname NOT LIKE 'pg_toast%' "
                                      "ORDER BY 1, 2").fetchall(),
            "triggers": conn.execute("SELECT tgrelid::regclass::text, tgname FROM pg_trigger WHERE NOT tgisinternal "
                                     "ORDER BY 1, 2").fetchall(),
            "functions": conn.execute(f"SELECT n.nspname, p.proname FROM pg_proc p JOIN pg_namespace n "
                                      f"ON n.oid = p.pronamespace WHERE n.nspname NOT IN {system} "
                                      "ORDER BY 1, 2").fetchall(),
        }
        tables = conn.execute("SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                              "WHERE n.nspname = 'public' AND c.relkind = 'r' ORDER BY 1").fetchall()
        for (table,) in tables:
            query = sql.SQL("SELECT count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) "
                            "FROM public.{} t").format(sql.Identifier(table))
            out[f"rows:{table}"] = conn.execute(query).fetchone()
        for (seq,) in conn.execute("SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                                   "WHERE n.nspname = 'public' AND c.relkind = 'S' ORDER BY 1").fetchall():
            out[f"seq:{seq}"] = conn.execute(
                sql.SQL("SELECT last_value, is_called FROM public.{}").format(sql.Identifier(seq))).fetchone()
    return out


def killpoint_schemas(dsn: str) -> list[str]:
    """Names of the session schemas killpoint has in the database now."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return [r[0] for r in conn.execute(
            r"SELECT nspname FROM pg_namespace WHERE nspname LIKE 'killpoint\_s\_%' ORDER BY 1").fetchall()]
