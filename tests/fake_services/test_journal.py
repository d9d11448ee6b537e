"""The journal's reads of one run come from that run's own records (kept as they arrive), and answer what
filtering the whole session answers: the same records, in arrival order, as copies; `reset(run)` forgets
them (fake_services/journal.py)."""

from __future__ import annotations

from killpoint.fake_services.journal import Journal


def _respond(seed: str) -> tuple[str, dict]:
    return f"id-{seed}", {"ok": True}


def fill(journal: Journal) -> None:
    for n in range(12):
        run, service = f"r-{n % 3}", ("mailer", "ledger")[n % 2]
        attempt = journal.begin(service, run, f"k{n}" if n % 4 else None, f"d{n}", "/x")
        journal.apply(attempt, {"n": n}, dedupe=True, respond=_respond)
        journal.finish(attempt, "applied", 200)
        journal.add_model_request({"order": attempt["order"], "run_id": run, "service": "model", "n": n})


def test_one_runs_records_are_the_session_filtered_to_it_and_reset_forgets_them() -> None:
    journal = Journal()
    fill(journal)
    for run in ("r-0", "r-1", "r-2", "r-9"):
        assert journal.attempts(run) == [r for r in journal.attempts() if r["run_id"] == run]
        assert journal.effects(run) == [r for r in journal.effects() if r["run_id"] == run]
        assert journal.model_requests(run) == [r for r in journal.model_requests() if r["run_id"] == run]
        for service in ("mailer", "ledger"):
            assert journal.effects_of(service, run) == [r for r in journal.effects(run) if r["service"] == service]
    assert len(journal.attempts("r-1")) == 4
    journal.attempts("r-1")[0]["run_id"] = "changed"  # a copy: the journal's record is not touched
    assert journal.attempts("r-1")[0]["run_id"] == "r-1"
    journal.reset("r-1")
    assert journal.attempts("r-1") == journal.effects("r-1") == journal.model_requests("r-1") == []
    assert {r["run_id"] for r in journal.attempts()} == {"r-0", "r-2"}
    journal.reset()
    assert journal.attempts() == journal.attempts("r-0") == []


def held(journal: Journal) -> int:
    """Records and index entries the journal holds (its own structures, whatever the reads filter)."""
    lists = len(journal._attempts) + len(journal._effects) + len(journal._model)  # noqa: SLF001
    return lists + len(journal._by_key) + len(journal._by_id) + len(journal._counts)  # noqa: SLF001


def test_forgetting_each_run_once_judged_keeps_a_long_session_flat() -> None:
    """A harness forgets every run after judging it: what the journal holds stays bounded over thousands of
    runs (not one record per run left behind), the runs not forgotten keep all of theirs, and a run id used
    again after it was forgotten starts with no records and no keys."""
    journal = Journal()
    sizes = []
    for n in range(3000):
        run = f"run-{n}"
        for key in ("charge", "email"):
            attempt = journal.begin("ledger", run, f"{run}:{key}", key, "/x")
            journal.apply(attempt, {"n": n}, dedupe=True, respond=_respond)
            journal.finish(attempt, "applied", 200)
        journal.add_model_request({"order": attempt["order"], "run_id": run, "service": "model"})
        if n != 7:
            journal.reset(run)
        sizes.append(held(journal))
    assert max(sizes[1000:]) <= max(sizes[:100]) + 20, (max(sizes[:100]), max(sizes[1000:]))
    assert [r["run_id"] for r in journal.attempts()] == ["run-7", "run-7"]  # the one run kept is whole
    assert len(journal.effects("run-7")) == 2 and len(journal.model_requests("run-7")) == 1
    again = journal.begin("ledger", "run-3", "run-3:charge", "charge", "/x")
    assert journal.apply(again, {}, dedupe=True, respond=_respond)[0] == "applied"  # its old key is gone
    assert [r["order"] for r in journal.attempts("run-3")] == [again["order"]]
