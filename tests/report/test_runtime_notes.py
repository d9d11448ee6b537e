"""A runtime's note on a run (`Adapter.notes`, e.g. LangGraph's checkpoints that sort below their parent)
reaches the failure block as a `runtime:` line and the trial's record in verdicts.json; a run without one
prints and records nothing of it."""

from __future__ import annotations

import json
from pathlib import Path

from killpoint.checkers.evidence import Evidence
from killpoint.checkers.verdict import Verdict
from killpoint.faults.schedule import Schedule
from killpoint.report.text import trial_block, write_run_dir
from killpoint.run.scenario import ScenarioResult
from killpoint.run.trial import Trial

STUCK = [Verdict("completes", "fail", "liveness: not done after 6 incarnations (bound 6)")]
NOTE = "the framework wrote a checkpoint below its parent; fix: keep clocks monotonic"


def test_a_runtime_note_is_printed_in_the_block_and_recorded_with_the_trial(tmp_path: Path) -> None:
    noted = Trial("m-1", Schedule.parse("plan:checkpoint.writing:clock-1h"), None, Evidence("m-1", notes=[NOTE]), STUCK)
    plain = Trial("m-2", Schedule.parse("plan:checkpoint.writing:kill"), None, Evidence("m-2"), STUCK)
    assert f"  runtime: {NOTE}" in trial_block("mixed-faults", noted, "s")
    assert not any(line.lstrip().startswith("runtime:") for line in trial_block("mixed-faults", plain, "s"))
    write_run_dir(tmp_path, [ScenarioResult("mixed-faults", "fail", [noted, plain], 1.0)], {})
    (record,) = json.loads((tmp_path / "verdicts.json").read_text())
    assert [t.get("notes") for t in record["trials"]] == [[NOTE], None]
