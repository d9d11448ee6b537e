"""An agent that is not the reference agent gets plain answers: its schedules are checked against its own
steps before anything runs, a fault it never reaches leaves a trial unknown (never a pass), fields that
differ between two crash-free runs are found and left out (and a field that differs only after a crash is
still a failure), and a checker with no evidence for it (no model requests) does not decide the run."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from killpoint.checkers import run_checkers
from killpoint.checkers.evidence import Evidence
from killpoint.checkers.verdict import combine
from killpoint.env.postgres import PostgresHandle
from killpoint.events import RunEvidence
from killpoint.faults.schedule import Schedule, ScheduleError
from killpoint.run.trial import Session
from tests.helpers.harness import harness_session
from tests.helpers.sandbox import Sandbox

TIMESTAMPED = "tests.gallery.variants.timestamped"
RESUME_MARKED = "tests.gallery.variants.resume_marked"


@pytest.fixture(scope="module")
def timestamped(pg_server: PostgresHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    with harness_session(pg_server, tmp_path_factory.mktemp("timestamped"), "t_own_timestamped",
                         steps=TIMESTAMPED) as s:
        yield s


@pytest.fixture(scope="module")
def marked(pg_server: PostgresHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    with harness_session(pg_server, tmp_path_factory.mktemp("marked"), "t_own_marked", steps=RESUME_MARKED) as s:
        yield s


def test_a_field_that_differs_between_crash_free_runs_is_found_and_not_compared(timestamped: Session) -> None:
    base = timestamped.baseline()
    assert base.volatile == {"state.recorded_at"}
    (recorded,) = timestamped.history.of_run(base.run_id, "run.evidence")  # recorded once, with its volatile fields
    assert isinstance(recorded, RunEvidence) and (recorded.options or {})["volatile"] == ["state.recorded_at"]
    trial = timestamped.trial(Schedule.parse("email:effect.applied:kill"))
    assert trial.outcome == "pass", trial.failing()
    same = next(v for v in trial.verdicts if v.checker == "same_final_state")
    assert "not compared" in same.reason and "state.recorded_at" in same.reason


def test_a_field_that_differs_only_after_a_crash_still_fails(marked: Session) -> None:
    assert marked.baseline().volatile == frozenset()  # both crash-free runs were done by their first worker
    trial = marked.trial(Schedule.parse("record:step.start:kill"))
    assert trial.outcome == "fail"
    same = next(v for v in trial.verdicts if v.checker == "same_final_state")
    assert same.outcome == "fail" and any("recorded_by" in line for line in same.evidence), same


def test_a_fault_on_a_step_the_agent_lacks_is_refused_before_anything_runs(timestamped: Session) -> None:
    before = len(timestamped.history.events("run.begin"))
    with pytest.raises(ScheduleError, match="unknown step 'refnd'.*use one of: charge, email, plan, record"):
        timestamped.trial(Schedule.parse("refnd:effect.applied:kill"))
    assert len(timestamped.history.events("run.begin")) == before


def test_an_explicit_fault_that_never_fires_leaves_the_trial_unknown(timestamped: Session) -> None:
    trial = timestamped.trial(Schedule.parse("email:effect.applied:kill@5"))
    assert trial.outcome == "unknown"
    v = next(v for v in trial.verdicts if v.checker == "faults_injected")
    assert v.outcome == "unknown" and "email:effect.applied:kill@5" in v.reason


def test_a_checker_without_evidence_for_this_agent_does_not_decide() -> None:
    ev = Evidence(run_id="r", final={"cursor": "done", "status": "done", "state": {}})
    base = Evidence(run_id="b", final={"cursor": "done", "status": "done", "state": {}})
    (fidelity,) = run_checkers(["context_fidelity"], ev, base)
    assert fidelity.outcome == "n/a" and "no model requests" in fidelity.reason
    assert combine([fidelity, *run_checkers(["completes"], ev, base)]) == "pass"
    assert combine([fidelity]) == "unknown"  # nothing decided it: never a pass


def test_replay_of_a_fault_that_never_fires_is_unknown_not_pass(sandbox: Sandbox) -> None:
    done = sandbox.run("replay", "--scenario", "crash-points", "--schedule", "email:effect.applied:kill@7",
                       "--out", str(sandbox.out))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "UNKNOWN" in done.stdout and "faults_injected" in done.stdout
    assert "email:effect.applied:kill@7" in done.stdout


def test_one_scenarios_error_does_not_cost_the_others(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A scenario that raises a KillpointError mid-run is recorded as an error with its message; the others
    still run, and verdicts.json, meta.json and the JUnit file are written; the exit code is the worst (2)."""
    from killpoint.cli import main as cli
    from killpoint.errors import UsageError
    from killpoint.scenarios.db_crash import DbCrash

    def broken(self: DbCrash, ctx: object) -> list:
        raise UsageError("test-boom", "this scenario cannot run here", "nothing: it is a test")

    monkeypatch.setattr(DbCrash, "run", broken)
    monkeypatch.chdir(tmp_path)
    out, junit = tmp_path / "runs", tmp_path / "junit.xml"
    code = cli.main(["run", "--scenario", "db-crash", "--scenario", "rollback-refusal", "--seed", "1",
                     "--out", str(out), "--junit", str(junit), "--quiet"])
    assert code == 2, capsys.readouterr()
    (run_dir,) = out.iterdir()
    verdicts = {r["scenario"]: r for r in json.loads((run_dir / "verdicts.json").read_text())}
    assert verdicts["db-crash"]["outcome"] == "error" and "this scenario cannot run here" in verdicts["db-crash"]["reason"]
    assert verdicts["rollback-refusal"]["outcome"] == "pass", verdicts
    assert (run_dir / "meta.json").is_file() and "this scenario cannot run here" in junit.read_text()


def test_skip_scenario_leaves_it_out_and_a_misspelt_one_is_a_usage_error(sandbox: Sandbox) -> None:
    done = sandbox.run("run", "--scenario", "rollback-refusal", "--scenario", "db-crash",
                       "--skip-scenario", "db-crash", "--out", str(sandbox.out), "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rollback-refusal" in done.stdout and "db-crash" not in done.stdout
    bad = sandbox.run("run", "--skip-scenario", "no-such-scenario", "--out", str(sandbox.out))
    assert bad.returncode == 2 and "unknown-scenario" in bad.stderr and "Traceback" not in bad.stderr


def test_an_agent_that_fails_without_faults_is_said_to_at_the_top(sandbox: Sandbox, tmp_path: Path) -> None:
    (sandbox.cwd / "keyerror_agent.py").write_text(
        "from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, initial_state\n"
        "from killpoint.reference_agent.invoice_agent import STEPS as _STEPS\n\n"
        "def email(cp, ctx):\n    return cp.state['no_such_field']\n\n"
        "STEPS = {**_STEPS, 'email': email}\n")
    done = sandbox.run("run", "--steps", "keyerror_agent", "--scenario", "crash-points", "--out", str(sandbox.out),
                       "--quiet")
    assert done.returncode == 1, done.stdout + done.stderr
    first = next(line for line in done.stdout.splitlines() if line.strip() and not line.startswith("base seed"))
    assert first.startswith("FAIL: the agent keyerror_agent fails with no faults"), done.stdout
    assert "KeyError: 'no_such_field'" in done.stdout and "no faulted trial was run" in done.stdout
    (run_dir,) = sandbox.out.iterdir()
    events = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    assert {e["run_id"] for e in events if e["type"] == "run.begin"} == {"baseline-1"}
    # the output ends with the one line that reproduces it, and that line does
    lines = done.stdout.rstrip().splitlines()
    assert lines[-2] == "reproduce the crash-free run's failure with:", done.stdout
    replay = lines[-1].strip()
    assert replay == "killpoint run --scenario crash-points --steps keyerror_agent", replay
    again = sandbox.run(*shlex.split(replay)[1:], "--out", str(tmp_path / "again"), "--quiet")
    assert again.returncode == 1, again.stdout + again.stderr
    assert "FAIL: the agent keyerror_agent fails with no faults" in again.stdout, again.stdout
    assert "KeyError: 'no_such_field'" in again.stdout and again.stdout.rstrip().splitlines()[-1] == lines[-1]


@pytest.mark.parametrize(("extra", "code", "words"), [
    ('OWN_EFFECTS_SQL = "SELECT * FROM acme_refunds WHERE run_id = %s"\n', "bad-own-effects-sql",
     'relation "acme_refunds" does not exist'),
    ('SCHEMA_SQL = "CREATE TABLE IF NOT EXISTS acme_refunds (run_id text"\n', "bad-agent-schema", "SyntaxError"),
    ('def setup(conn):\n    raise RuntimeError("no permission to create tables")\n', "bad-agent-schema",
     "no permission to create tables"),
], ids=["own-effects-sql-on-a-missing-table", "schema-sql-that-does-not-parse", "setup-that-raises"])
def test_an_agents_own_schema_error_is_one_line_before_any_run(sandbox: Sandbox, extra: str, code: str,
                                                               words: str) -> None:
    """A step module's own SQL runs (or is checked) once per database before any run: its error is one line
    naming the module and the database's message, exit 2, and nothing is left behind."""
    (sandbox.cwd / "own_schema_agent.py").write_text(
        "from killpoint.reference_agent.invoice_agent import MIGRATIONS, START, STATE_VERSION, STEPS, "
        "initial_state\n" + extra)
    done = sandbox.run("run", "--steps", "own_schema_agent", "--scenario", "rollback-refusal", "--out",
                       str(sandbox.out), "--seed", "1")
    assert done.returncode == 2, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("killpoint: error")]
    assert len(errors) == 1 and f"error[{code}]" in errors[0] and "own_schema_agent" in errors[0], done.stderr
    assert words in errors[0] and "Traceback" not in done.stderr
    assert not sandbox.out.exists() or not any(sandbox.out.iterdir())
    assert sandbox.survivors() == [] and sandbox.leftover_dirs() == []


def test_a_black_box_worker_that_fails_without_faults_is_named_by_its_command(sandbox: Sandbox) -> None:
    """A `--worker-cmd` worker has no step module of killpoint's: the message names the command it ran, not
    the reference agent whose module is the default `--steps` (a user reading it would look in the wrong file)."""
    (sandbox.cwd / "exits.py").write_text("import sys\nsys.exit(3)\n")
    done = sandbox.run("run", "--worker-cmd", "python exits.py {run_id}", "--scenario", "crash-points",
                       "--out", str(sandbox.out), "--quiet")
    assert done.returncode == 1, done.stdout + done.stderr
    first = next(line for line in done.stdout.splitlines() if line.strip() and not line.startswith("base seed"))
    assert first.startswith("FAIL: the agent --worker-cmd 'python exits.py {run_id}' fails with no faults"), done.stdout
    assert "reference_agent" not in first and "no faulted trial was run" in done.stdout, done.stdout
    assert done.stdout.rstrip().splitlines()[-1].strip() == (
        "killpoint run --scenario crash-points --worker-cmd 'python exits.py {run_id}'"), done.stdout
    assert sandbox.survivors() == []


@pytest.mark.parametrize(("adapter", "script", "says"), [
    ("dbos", "import sys\nprint('DBOS config: system_database_url missing', file=sys.stderr)\nsys.exit(1)\n",
     ["exited 1 (and 2 more worker(s) the same way)", "DBOS config: system_database_url missing"]),
    ("langgraph", "raise ImportError('no module named langgraph_checkpoint_pg')\n",
     ["died of an exception, exit 1", "ImportError: no module named langgraph_checkpoint_pg"]),
    (None, "import sys\nsys.exit(4)\n", ["exited 4 (and 2 more worker(s) the same way)", "(empty)"]),
], ids=["dbos-exits-with-a-message", "langgraph-raises-at-import", "own-table-exits-silently"])
def test_a_worker_that_dies_before_its_frameworks_tables_exist_fails_with_no_faults_and_says_why(
        sandbox: Sandbox, dsn_args: list[str], adapter: str | None, script: str, says: list[str]) -> None:
    """A worker that dies before its framework created its tables leaves nothing to read: the run is the
    agent's failure with no faults (exit 1), whose block shows what each worker last wrote (a message, a
    traceback, or an empty log), never a harness traceback (before: `UndefinedTable` from the adapter's status
    read). Three ways of dying, on both framework adapters and on the seeds' table."""
    (sandbox.cwd / "dies.py").write_text(script)
    done = sandbox.run("run", "--worker-cmd", "python dies.py {run_id}", "--scenario", "crash-points",
                       *(["--adapter", adapter] if adapter else []), *dsn_args, "--out", str(sandbox.out))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert "FAIL: the agent --worker-cmd 'python dies.py {run_id}' fails with no faults" in done.stdout, done.stdout
    for words in says:
        assert words in done.stdout, done.stdout
    assert sandbox.survivors() == [] and sandbox.leftover_dirs() == []


def test_the_whole_suites_crash_free_failure_of_a_black_box_worker_is_reproduced_by_a_scenario_that_runs_it(
        sandbox: Sandbox, dsn_args: list[str]) -> None:
    """The reproducing line names a scenario that applies to a black-box worker (before: concurrent-runs, the
    first scenario of the registry, which a --worker-cmd skips), and running it gives the same failure."""
    (sandbox.cwd / "exits.py").write_text("import sys\nsys.exit(3)\n")
    done = sandbox.run("run", "--worker-cmd", "python exits.py {run_id}", *dsn_args, "--out", str(sandbox.out))
    assert done.returncode == 1, done.stdout + done.stderr
    line = done.stdout.rstrip().splitlines()[-1].strip()
    assert line == "killpoint run --scenario crash-points --worker-cmd 'python exits.py {run_id}'", done.stdout
    again = sandbox.run(*shlex.split(line)[1:], *dsn_args, "--out", str(sandbox.out))
    assert again.returncode == 1 and "fails with no faults" in again.stdout, again.stdout + again.stderr
    assert "SKIP" not in again.stdout, again.stdout
    assert sandbox.survivors() == []
