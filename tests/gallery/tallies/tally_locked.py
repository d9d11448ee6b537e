"""Correct, and looks like ``tally_carried`` (the tally read in ``book``, written back as read + credit in
``close``), but a run holds its customer's lock from ``open`` until ``release``, after ``close`` committed (a
session advisory lock on a connection the process keeps, which goes with the process if the worker dies):
runs of one customer go one at a time, so none reads a tally another is about to write (for runs not killed
between ``book`` and ``close``, as concurrent-runs' own are not: a lock does not outlive its process). Its runs cannot all
begin ``book`` together (the others wait for the lock in ``open``): concurrent-runs' rendezvous must let the
first go on without them, not hang, and pass it."""

from __future__ import annotations

import os
import zlib

import psycopg

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from tests.gallery.tallies import tally_carried
from tests.gallery.tallies.common import SCHEMA_SQL, STATE_VERSION, TALLY_INVARIANTS, initial_state
from tests.gallery.tallies.tally_carried import book

__all__ = ["INVARIANTS", "SCHEMA_SQL", "START", "STATE_VERSION", "STEPS", "initial_state"]

INVARIANTS = TALLY_INVARIANTS
START = "open"
_held: dict[str, psycopg.Connection] = {}
"""Customer -> the connection holding their lock, in this process."""


def _key(customer: str) -> int:
    return zlib.crc32(customer.encode())


def open_(cp: Checkpoint, ctx: StepContext) -> StepResult:
    customer = cp.state["customer"]
    if customer not in _held:
        conn = psycopg.connect(os.environ["DATABASE_URL"], autocommit=True)
        conn.execute("SELECT pg_advisory_lock(%s)", (_key(customer),))
        _held[customer] = conn
    return StepResult("book", {})


def close(cp: Checkpoint, ctx: StepContext) -> StepResult:
    result = tally_carried.close(cp, ctx)
    return StepResult("release", result.state, in_txn=result.in_txn)


def release(cp: Checkpoint, ctx: StepContext) -> StepResult:
    """The tally is committed (with `close`'s checkpoint): the next run of this customer may read it."""
    conn = _held.pop(cp.state["customer"], None)
    if conn is not None:  # none in a process that resumed the run after `open`'s died (its lock went with it)
        conn.execute("SELECT pg_advisory_unlock(%s)", (_key(cp.state["customer"]),))
        conn.close()
    return StepResult("done", {})


STEPS = {"open": open_, "book": book, "close": close, "release": release}
