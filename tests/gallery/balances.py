"""What the gallery's agents that keep a balance per customer share (not an agent): the table, the invariant
they declare over it, and the correct credit, added in the checkpoint's transaction."""

from __future__ import annotations

import psycopg

SCHEMA_SQL = "CREATE TABLE IF NOT EXISTS balances (account text PRIMARY KEY, balance_cents bigint NOT NULL)"
INVARIANTS = {"balances follow the charges": {"sql": "SELECT COALESCE(SUM(balance_cents), 0) FROM balances",
                                              "equals": "ledger.amount_cents"}}


def credit(cur: psycopg.Cursor, account: str, amount_cents: int) -> None:
    """Add `amount_cents` to the account's balance, in the caller's transaction (one statement: no lost update)."""
    cur.execute("INSERT INTO balances (account, balance_cents) VALUES (%s, %s) ON CONFLICT (account) "
                "DO UPDATE SET balance_cents = balances.balance_cents + EXCLUDED.balance_cents", (account, amount_cents))
