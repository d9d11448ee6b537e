"""The history's typed events: each kind is one frozen class, a line written by the harness before the events
were typed reads back into it and encodes to the same line, and `killpoint judge` of such a history
reproduces its verdicts."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from killpoint import events as kinds
from killpoint.events import (
    EVENT_KINDS,
    EVENT_TYPES,
    Escalate,
    IncEnd,
    Judged,
    Note,
    Point,
    decode,
    encode,
)
from killpoint.run.evidence import from_history
from killpoint.run.history import History
from killpoint.run.rejudge import rejudge

REPO = Path(__file__).resolve().parents[2]

OLD_LINES = [
    '{"i": 0, "run_id": "baseline-1", "schedule": "", "steps": "killpoint.reference_agent.invoice_agent", "t": 3.256334, "type": "run.begin"}',
    '{"i": 1, "inc": "baseline-1#1", "pid": 8532, "role": "worker", "run_id": "baseline-1", "t": 3.266816, "type": "inc.start"}',
    '{"i": 2, "inc": "baseline-1#1", "note": "worker.start", "owner": "baseline-1#1", "queue": false, "run_id": "baseline-1", "stack_signal": "SIGUSR1", "t": 3.271607, "type": "note"}',
    '{"i": 3, "inc": "baseline-1#1", "nth": 1, "point": "step.start", "run_id": "baseline-1", "seq": 0, "source": "worker", "step": "plan", "t": 3.287202, "type": "point"}',
    '{"i": 4, "inc": "baseline-1#1", "nth": 1, "point": "model.request", "run_id": "baseline-1", "source": "model", "step": "plan", "t": 3.294647, "type": "point"}',
    '{"i": 26, "inc": "baseline-1#1", "note": "run.done", "run_id": "baseline-1", "seq": 5, "t": 3.327376, "type": "note"}',
    '{"cpu": 0.024786, "exit_code": 0, "i": 27, "inc": "baseline-1#1", "run_id": "baseline-1", "signal": null, "t": 3.336087, "type": "inc.end"}',
    '{"i": 28, "limit": null, "run_id": "baseline-1", "t": 3.339457, "type": "run.end", "unfired": []}',
    '{"app": "baseline-1#1", "cursor": "done", "i": 35, "of": 29, "run_id": "baseline-1", "seq": 5, "status": "done", "t": 3.342718, "type": "checkpoint.write"}',
    '{"i": 36, "of": 29, "record": {"key": null, "order": 1, "outcome": "applied", "path": "/v1/messages", "payload_digest": "8def513bc3a1eded", "run_id": "baseline-1", "service": "model", "status": 200, "t": 220.960395564}, "run_id": "baseline-1", "t": 3.342829, "type": "attempt"}',
    '{"action": "term", "i": 94, "inc": "crash-points-4#1", "nth": 1, "point": "step.start", "run_id": "crash-points-4", "step": "plan", "t": 3.427498, "type": "fault"}',
    '{"grace": 0.1, "i": 2533, "inc": "deploy-drain-64#1", "run_id": "deploy-drain-64", "t": 6.918262, "type": "escalate"}',
    '{"i": 3217, "run_id": "db-crash-78", "t": 8.966289, "type": "db.down"}',
    '{"i": 3218, "run_id": "db-crash-78", "t": 9.012479, "type": "db.up"}',
    '{"i": 3791, "inc": "zombie-worker-89#1", "run_id": "zombie-worker-89", "t": 10.943472, "type": "thaw", "why": "successor ended"}',
]
"""Lines of a history.jsonl written by the harness before its events were typed (crash-points, deploy-drain,
db-crash and zombie-worker runs)."""

OLD_JUDGED = [
    '{"i": 0, "run_id": "deploy-drain-7", "schedule": "charge:step.start:term", "steps": "m", "t": 0.0, "type": "run.begin"}',
    '{"i": 1, "inc": "deploy-drain-7#1", "pid": 10, "role": "worker", "run_id": "deploy-drain-7", "t": 0.01, "type": "inc.start"}',
    '{"i": 2, "inc": "deploy-drain-7#1", "note": "worker.start", "run_id": "deploy-drain-7", "stack_signal": "SIGUSR1", "t": 0.02, "type": "note"}',
    '{"i": 3, "inc": "deploy-drain-7#1", "nth": 1, "point": "step.start", "run_id": "deploy-drain-7", "seq": 1, "source": "worker", "step": "charge", "t": 0.03, "type": "point"}',
    '{"action": "term", "i": 4, "inc": "deploy-drain-7#1", "nth": 1, "point": "step.start", "run_id": "deploy-drain-7", "step": "charge", "t": 0.04, "type": "fault"}',
    '{"grace": 0.1, "i": 5, "inc": "deploy-drain-7#1", "run_id": "deploy-drain-7", "t": 0.15, "type": "escalate"}',
    '{"cpu": 0.02, "exit_code": null, "i": 6, "inc": "deploy-drain-7#1", "run_id": "deploy-drain-7", "signal": 9, "t": 0.16, "type": "inc.end"}',
    '{"i": 7, "limit": null, "run_id": "deploy-drain-7", "t": 0.17, "type": "run.end", "unfired": []}',
    '{"crashes": {}, "final": {"cursor": "charge", "seq": 1, "status": "running"}, "final_raw": "{}", "i": 8, "incarnations": [{"exit_code": null, "inc": "deploy-drain-7#1", "pid": 10, "role": "worker", "signal": 9}], "leftovers": [], "limit": null, "options": {"drain_expect": "checkpoint", "exit_codes": "killpoint", "expect": "checkpoint", "explicit": true, "grace": 0.1}, "own_effects": [], "run_id": "deploy-drain-7", "t": 0.18, "type": "run.evidence"}',
    '{"app": "deploy-drain-7#1", "cursor": "charge", "i": 9, "of": 8, "run_id": "deploy-drain-7", "seq": 1, "status": "running", "t": 0.19, "type": "checkpoint.write"}',
    '{"i": 10, "of": 8, "record": {"key": "deploy-drain-7:charge", "outcome": "applied", "service": "ledger"}, "run_id": "deploy-drain-7", "t": 0.2, "type": "attempt"}',
    '{"baseline": null, "checkers": ["drains_on_sigterm", "no_rewind", "no_orphans", "faults_injected"], "failing": ["drains_on_sigterm"], "i": 11, "outcome": "fail", "run_id": "deploy-drain-7", "schedule": "charge:step.start:term", "seed": null, "t": 0.21, "type": "verdict", "verdicts": [{"checker": "drains_on_sigterm", "evidence": ["term at charge:step.start"], "outcome": "fail", "reason": "deploy-drain-7#1 was still running when the grace period ended (0.1s) and was SIGKILLed"}, {"checker": "no_rewind", "evidence": [], "outcome": "pass", "reason": "1 checkpoint writes, seq strictly increasing"}, {"checker": "no_orphans", "evidence": [], "outcome": "pass", "reason": "1 incarnation(s), none left running"}, {"checker": "faults_injected", "evidence": [], "outcome": "pass", "reason": "1 fault(s) injected"}]}',
]
"""A judged run as the harness before typed events recorded it: its control events, its evidence, its verdict."""


def test_an_old_line_reads_back_into_its_class_and_encodes_to_the_same_line() -> None:
    for line in OLD_LINES:
        event = decode(json.loads(line))
        assert event is not None and event.kind == json.loads(line)["type"], line
        assert json.dumps(encode(event), sort_keys=True) == line


def test_an_old_line_s_fields_are_attributes_and_the_rest_is_kept() -> None:
    note, point, end = (decode(json.loads(OLD_LINES[n])) for n in (2, 3, 6))
    assert isinstance(note, Note) and note.note == "worker.start" and note.inc == "baseline-1#1"
    assert note.extra == {"owner": "baseline-1#1", "queue": False, "stack_signal": "SIGUSR1"}
    assert isinstance(point, Point) and (point.step, point.point, point.nth, point.seq) == ("plan", "step.start", 1, 0)
    assert isinstance(end, IncEnd) and (end.exit_code, end.signal, end.cpu) == (0, None, 0.024786)
    without_seq = decode(json.loads(OLD_LINES[4]))
    assert isinstance(without_seq, Point) and without_seq.seq is None and "seq" not in encode(without_seq)
    assert point["step"] == "plan" and note.get("stack_signal") == "SIGUSR1" and dict(end)["cpu"] == 0.024786


def test_a_history_of_old_lines_is_judged_again_to_its_recorded_verdicts(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text("\n".join(OLD_JUDGED) + "\n")
    events, bad = History.read(path)
    assert bad == 0 and [json.dumps(encode(e), sort_keys=True) for e in events] == OLD_JUDGED
    (trial,) = rejudge(events)
    assert trial.reproduces and trial.outcome == "fail", trial.differences()
    ev = from_history(events, trial.run_id)
    assert (ev.knobs.grace, ev.knobs.exit_codes, ev.replay.explicit) == (0.1, "killpoint", True)
    assert dict(ev.extra) == {"drain_expect": "checkpoint", "expect": "checkpoint"} and ev.volatile == frozenset()
    assert [e.kind for e in ev.events] == ["run.begin", "inc.start", "note", "point", "fault", "escalate", "inc.end",
                                           "run.end"]
    assert [e.grace for e in ev.events if isinstance(e, Escalate)] == [0.1]


def test_append_and_add_write_the_same_line(tmp_path: Path) -> None:
    history = History(tmp_path / "history.jsonl")
    a = history.append("verdict", run_id="r-1", outcome="pass", schedule="", seed=None, checkers=["completes"],
                       baseline=None, verdicts=[], failing=[])
    b = history.add(Judged(run_id="r-1", outcome="pass", schedule="", seed=None, checkers=["completes"],
                           baseline=None, verdicts=[], failing=[]))
    history.close()
    first, second = (json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines())
    assert {k: v for k, v in first.items() if k not in ("i", "t")} == {k: v for k, v in second.items()
                                                                         if k not in ("i", "t")}
    assert (a.i, b.i) == (0, 1) and isinstance(b, Judged) and History.load(tmp_path / "history.jsonl") == [a, b]


def test_a_line_of_no_known_kind_is_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text('{"i": 0, "t": 0.0, "type": "no.such.kind"}\n{"i": 1, "t": 0.0, "type": 3}\n' + OLD_LINES[0] + "\n")
    events, bad = History.read(path)
    assert bad == 2 and [e.kind for e in events] == ["run.begin"]


def test_every_kind_is_one_frozen_class_and_the_contract_describes_it_alike() -> None:
    assert list(EVENT_KINDS) == list(EVENT_TYPES) and len(EVENT_KINDS) == 25
    for kind, cls in EVENT_TYPES.items():
        assert cls.kind == kind and getattr(kinds, cls.__name__) is cls
        with pytest.raises(AttributeError):
            cls().run_id = "x"  # type: ignore[misc]
    text = (REPO / "docs" / "contracts.md").read_text()
    section = text[text.index("## 6. History events"):text.index("## 7.")]
    assert dict(re.findall(r"^\| `([a-z.]+)` \| (.*) \|$", section, flags=re.M)) == EVENT_KINDS
