"""Correct, and sends no service request: ``count`` tallies words into the run's own row and ``seal`` stamps
it, each write in its checkpoint's transaction. Its only effects are its own rows (`OWN_EFFECTS_SQL`), so the
checkers of service requests (`retries_keep_keys`) have nothing to judge: `n/a`, never a pass."""

from __future__ import annotations

from typing import Any

import psycopg

from killpoint.reference_agent import Checkpoint, StepContext, StepResult

STATE_VERSION = 1
START = "count"
SCHEMA_SQL = "CREATE TABLE IF NOT EXISTS word_counts (run_id text PRIMARY KEY, words integer NOT NULL, sealed boolean NOT NULL)"
OWN_EFFECTS_SQL = "SELECT words, sealed FROM word_counts WHERE run_id = %s"


def initial_state(params: dict[str, Any]) -> dict[str, Any]:
    return {"text": str(params.get("text", "one two three four")), "words": None}


def count(cp: Checkpoint, ctx: StepContext) -> StepResult:
    words = len(cp.state["text"].split())

    def write(cur: psycopg.Cursor) -> None:
        cur.execute("INSERT INTO word_counts (run_id, words, sealed) VALUES (%s, %s, false) ON CONFLICT (run_id) "
                    "DO NOTHING", (ctx.run_id, words))

    return StepResult("seal", {"words": words}, in_txn=write)


def seal(cp: Checkpoint, ctx: StepContext) -> StepResult:
    def write(cur: psycopg.Cursor) -> None:
        cur.execute("UPDATE word_counts SET sealed = true WHERE run_id = %s", (ctx.run_id,))

    return StepResult("done", {}, in_txn=write)


STEPS = {"count": count, "seal": seal}
