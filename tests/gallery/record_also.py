"""What several gallery agents share (not an agent): the reference agent's `record` step, with one more write
of the agent's own in the same checkpoint transaction (committed with the checkpoint, or not at all)."""

from __future__ import annotations

from collections.abc import Callable

import psycopg

from killpoint.reference_agent import invoice_agent
from killpoint.reference_agent.runtime import Checkpoint, StepContext, StepResult

Write = Callable[[psycopg.Cursor, Checkpoint], None]


def record_also(write: Write) -> Callable[[Checkpoint, StepContext], StepResult]:
    """`invoice_agent.record`, whose checkpoint transaction also runs `write(cur, cp)` after the invoice row."""

    def record(cp: Checkpoint, ctx: StepContext) -> StepResult:
        result = invoice_agent.record(cp, ctx)

        def both(cur: psycopg.Cursor) -> None:
            result.in_txn(cur)
            write(cur, cp)

        return StepResult(result.cursor, result.state, in_txn=both)

    return record
