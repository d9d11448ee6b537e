"""The checkpoint store's monotonic guard and the per-run lease: in process, and with real workers."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from killpoint.reference_agent.checkpoint import Checkpoint
from killpoint.reference_agent.lease import Lease, LeaseBusy, LeaseLost
from killpoint.reference_agent.schema import ensure_schema
from killpoint.reference_agent.store import CheckpointStore, Fenced
from tests.helpers.agents import AgentEnv, agent_fixture  # noqa: F401 (the `agent` fixture)


@pytest.fixture
def conn(pg_dsn: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(pg_dsn, autocommit=True) as c:
        ensure_schema(c)
        yield c


def cp(seq: int, cursor: str = "plan", run_id: str = "r-1") -> Checkpoint:
    return Checkpoint(run_id=run_id, seq=seq, version=1, cursor=cursor, status="running",
                      state={"n": seq}, window=[], cost_usd=0.0, updated_at="t")


def test_older_seq_cannot_overwrite_newer(conn: psycopg.Connection) -> None:
    store = CheckpointStore(conn)
    store.save(cp(1))
    store.save(cp(3, "email"))
    for stale in (2, 3):  # older, and equal: both refused
        with pytest.raises(Fenced) as refused:
            store.save(cp(stale, "charge"))
        assert (refused.value.seq, refused.value.stored_seq) == (stale, 3)
    assert store.load("r-1") == cp(3, "email").to_json()
    assert conn.execute("SELECT seq, status FROM checkpoints").fetchall() == [(3, "running")]


def test_fenced_write_rolls_back_the_steps_own_write(conn: psycopg.Connection) -> None:
    store = CheckpointStore(conn)
    store.save(cp(5))
    points: list[str] = []

    def insert(cur: psycopg.Cursor) -> None:
        cur.execute("INSERT INTO invoices VALUES ('r-1', 'INV-1', 100)")

    with pytest.raises(Fenced):
        store.save(cp(4), in_txn=insert, point=points.append)
    assert conn.execute("SELECT count(*) FROM invoices").fetchone() == (0,)
    assert points == []  # a refused write reaches neither checkpoint point
    store.save(cp(6), in_txn=insert, point=points.append)
    assert conn.execute("SELECT count(*) FROM invoices").fetchone() == (1,)
    assert points == ["checkpoint.writing", "checkpoint.committed"]


def test_lease_keeps_other_owners_out_until_it_expires(conn: psycopg.Connection) -> None:
    mine, theirs = Lease(conn, "r-1", "a", 30), Lease(conn, "r-1", "b", 30)
    mine.acquire()
    mine.acquire()  # re-entrant for the same owner
    with pytest.raises(LeaseBusy) as busy:
        theirs.acquire()
    assert busy.value.holder == "a"
    conn.execute("UPDATE leases SET expires_at = now() - interval '1 second' WHERE run_id = 'r-1'")
    theirs.acquire()
    with pytest.raises(LeaseLost):
        mine.renew()
    theirs.renew()
    mine.release()  # not ours any more: no effect
    assert conn.execute("SELECT owner FROM leases").fetchall() == [("b",)]
    theirs.release()
    assert conn.execute("SELECT count(*) FROM leases").fetchone() == (0,)


def test_fenced_worker_stops_without_further_effects(agent: AgentEnv) -> None:
    """A zombie (held before `charge`, its lease expired, the run finished by another worker) resumes: its
    checkpoint write is refused, it exits 4 and does nothing more."""
    hold = agent.points.hold("step.start", "charge")
    zombie = agent.start("r-z")
    hold.wait()
    agent.expire_lease("r-z")
    successor = agent.run("r-z")
    assert successor.proc.returncode == 0, successor.output
    finished = agent.row("r-z")
    assert finished["data"]["cursor"] == "done"

    hold.release()
    assert zombie.wait() == 4, zombie.output
    assert "FENCED" in zombie.output
    assert agent.row("r-z") == finished
    assert len(agent.effects("r-z", "ledger")) == 1  # its charge was deduplicated by the key
    assert len(agent.effects("r-z", "mailer")) == 1  # and it never went on to the email
    assert agent.invoices("r-z") == [("INV-1001", 12_500)]
    assert [n["note"] for n in agent.points.notes("fenced")] == ["fenced"]


def test_live_lease_keeps_a_second_worker_out(agent: AgentEnv) -> None:
    hold = agent.points.hold("step.start", "plan")
    first = agent.start("r-l", KILLPOINT_WORKER_ID="first")
    hold.wait()
    before = agent.row("r-l")
    second = agent.run("r-l", KILLPOINT_WORKER_ID="second")
    assert second.proc.returncode == 5, second.output
    assert agent.row("r-l") == before
    assert agent.model_requests("r-l") == []
    assert agent.points.notes("lease.busy")[0]["holder"] == "first"
    hold.release()
    assert first.wait() == 0, first.output
    assert agent.row("r-l")["data"]["cursor"] == "done"
    assert agent.conn.execute("SELECT count(*) FROM leases").fetchone() == (0,)  # released at the end


def test_worker_that_lost_its_lease_stops_before_the_next_step(agent: AgentEnv) -> None:
    hold = agent.points.hold("checkpoint.committed", "plan")
    worker = agent.start("r-lost")
    hold.wait()
    agent.conn.execute("UPDATE leases SET owner = 'usurper', expires_at = now() + interval '1 minute' "
                       "WHERE run_id = 'r-lost'")
    hold.release()
    assert worker.wait() == 5, worker.output
    assert agent.row("r-lost")["data"]["cursor"] == "validate"
    assert len(agent.model_requests("r-lost")) == 1
    assert agent.points.notes("lease.lost")


def test_a_checkpoints_payload_is_what_asdict_gives_and_shares_no_container() -> None:
    """`Checkpoint.to_json` builds the stored payload without `dataclasses.asdict`'s generic walk: the same
    value for JSON state, a named tuple and a dataclass in it, and no list or dict shared with the checkpoint
    (a caller may change the payload)."""
    import dataclasses  # noqa: PLC0415
    from collections import namedtuple  # noqa: PLC0415

    Pair = namedtuple("Pair", "a b")  # noqa: PYI024

    @dataclasses.dataclass
    class Line:
        sku: str
        n: list[int]

    state = {"invoice": {"id": 7, "lines": [{"sku": "a", "n": 2}]}, "pair": Pair(1, [2]), "line": Line("b", [3]),
             "t": (1, {"x": None}), "ok": True, "f": 0.5}
    c = Checkpoint(run_id="r", seq=3, version=1, cursor="email", status="running", state=state,
                   window=[{"role": "user", "content": "hi"}], cost_usd=0.25, updated_at="t")
    payload = c.to_json()
    assert payload == dataclasses.asdict(c)
    assert type(payload["state"]["pair"]) is Pair and payload["state"]["line"] == {"sku": "b", "n": [3]}
    assert payload["state"]["invoice"] is not state["invoice"]
    assert payload["state"]["invoice"]["lines"][0] is not state["invoice"]["lines"][0]
    assert payload["window"][0] is not c.window[0] and payload["state"]["t"][1] is not state["t"][1]


def test_a_worker_renews_its_lease_before_every_step_but_the_first_which_taking_it_renewed(agent: AgentEnv) -> None:
    """Acquiring the lease sets it to expire a full term from now, and no step or kill point comes between
    that and the first step: a renewal there would be a round trip and a commit for nothing. Every later
    step renews (the test above: a lease lost after the first step stops the worker before the second)."""
    agent.conn.execute("""
        CREATE TABLE lease_writes (op text, expires_at timestamptz);
        CREATE FUNCTION log_lease_write() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN INSERT INTO lease_writes VALUES (TG_OP, NEW.expires_at); RETURN NEW; END $$;
        CREATE TRIGGER lease_writes AFTER INSERT OR UPDATE ON leases FOR EACH ROW EXECUTE FUNCTION log_lease_write();
    """)
    points = agent.points  # the worker reports its points here
    try:
        done = agent.run("r-renew")
        assert done.proc.returncode == 0, done.output
        steps = [step for step, point in points.points() if point == "step.start"]
        ops = [op for (op,) in agent.conn.execute("SELECT op FROM lease_writes").fetchall()]
    finally:
        agent.conn.execute("DROP TRIGGER lease_writes ON leases; DROP FUNCTION log_lease_write(); "
                           "DROP TABLE lease_writes")
    assert len(steps) == 5
    assert ops == ["INSERT"] + ["UPDATE"] * (len(steps) - 1)  # taken, then renewed before steps 2..5
