"""Bad input (issue 13, items 6 and 8): each row is a command line a hostile or careless user might type. Every
one exits 2 with one line, ``killpoint: error[CODE]: <problem>. Fix: <fix>``, before anything starts: no
traceback, no process, no cluster, no temp dir and no run directory left behind."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.helpers.sandbox import Sandbox


@dataclass(frozen=True)
class Row:
    """One bad input: the argv after `killpoint`, the error code, words the line must contain."""

    argv: tuple[str, ...]
    code: str
    says: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)


REPLAY = ("replay", "--scenario", "crash-points", "--schedule", "email:effect.applied:kill")

ROWS: dict[str, Row] = {
    # argparse's own errors: one line, not the usage block
    "unknown-option": Row(("run", "--bogus"), "bad-option", ("unrecognized arguments: --bogus",)),
    "unknown-command": Row(("frobnicate",), "bad-option", ("invalid choice",)),
    "missing-value": Row(("run", "--seed"), "bad-option", ("expected one argument",)),
    "bad-choice": Row(("run", "--postgres", "oracle"), "bad-option", ("invalid choice",)),
    "replay-needs-schedule": Row(("replay", "--scenario", "crash-points"), "bad-option", ("one of the arguments",)),
    # numbers out of range
    "grace-negative": Row((*REPLAY, "--grace", "-1"), "bad-option", ("grace must be at least 0",)),
    "grace-nan": Row((*REPLAY, "--grace", "nan"), "bad-option", ("grace must be",)),
    "grace-inf": Row((*REPLAY, "--grace", "inf"), "bad-option", ("grace must be",)),
    "grace-text": Row((*REPLAY, "--grace", "soon"), "bad-option", ("grace must be a number",)),
    "run-timeout-zero": Row((*REPLAY, "--run-timeout", "0"), "bad-option", ("run-timeout must be at least 1",)),
    "run-timeout-nan": Row((*REPLAY, "--run-timeout", "nan"), "bad-option", ("run-timeout must be",)),
    "budget-negative": Row(("run", "--budget", "-1"), "bad-option", ("budget must be at least 0",)),
    "budget-inf": Row(("run", "--budget", "inf"), "bad-option", ("budget must be",)),
    "random-zero": Row(("explore", "--scenario", "crash-points", "--random", "0"), "bad-option",
                       ("random must be at least 1",)),
    "random-huge": Row(("explore", "--scenario", "crash-points", "--random", "1000000000"), "bad-option",
                       ("at most 100000",)),
    "random-float": Row(("explore", "--scenario", "crash-points", "--random", "1e9"), "bad-option",
                        ("random must be a whole number",)),
    "seed-negative": Row(("run", "--seed", "-5"), "bad-option", ("seed must be at least 0",)),
    "seed-huge": Row(("run", "--seed", str(2**64)), "bad-option", ("seed must be",)),
    # --worker-cmd
    "worker-cmd-unbalanced-quote": Row((*REPLAY, "--worker-cmd", "python 'worker.py"), "bad-option",
                                       ("does not parse", "close its quotes")),
    "worker-cmd-empty": Row((*REPLAY, "--worker-cmd", ""), "bad-option", ("it is empty",)),
    "worker-cmd-blank": Row((*REPLAY, "--worker-cmd", "   "), "bad-option", ("it is empty",)),
    "worker-cmd-no-program": Row(("run", "--worker-cmd", "kp-no-such-worker {run_id}"), "worker-cmd-not-found",
                                 ("'kp-no-such-worker' is not on PATH",)),
    "worker-cmd-no-script": Row(("run", "--worker-cmd", f"{sys.executable} -u agent/worker.py {{run_id}}",
                                 "--adapter", "dbos"), "worker-cmd-not-found",
                                ("the script 'agent/worker.py' is not a file",)),
    "worker-cmd-redirect": Row(("run", "--worker-cmd", f"{sys.executable} -c pass {{run_id}} > worker.log"),
                               "worker-cmd-shell-syntax", ("the shell syntax '>'",)),
    "worker-cmd-no-module": Row(("run", "--worker-cmd", f"{sys.executable} -m kp_no_such_module {{run_id}}"),
                                "worker-cmd-not-found", ("no module 'kp_no_such_module' is found from",)),
    # --allow-egress: what the guard could never match
    "allow-egress-url": Row(("run", "--allow-egress", "https://api.stripe.com/v1"), "bad-allow-egress",
                            ("is a URL", "--allow-egress api.stripe.com")),
    "allow-egress-pattern": Row(("run", "--allow-egress", "*.stripe.com"), "bad-allow-egress", ("is a pattern",)),
    # paths that cannot be written
    "out-under-a-file": Row((*REPLAY, "--out", "/etc/hostname/runs"), "path-not-writable", ("not a directory",)),
    "out-in-proc": Row((*REPLAY, "--out", "/proc/killpoint-runs"), "path-not-writable", ("cannot write in /proc",)),
    "junit-is-a-directory": Row((*REPLAY, "--junit", "/tmp"), "path-not-writable", ("is a directory",)),
    "junit-under-a-file": Row((*REPLAY, "--junit", "/etc/hostname/x.xml"), "path-not-writable",
                              ("not a directory",)),
    # step modules that are hostile at import, or name steps that break schedules and replay lines
    "steps-loop-at-import": Row((*REPLAY, "--steps", "tests.gallery.invalid.loops_at_import"),
                                "steps-import-timeout", ("did not finish importing within 2 s",),
                                {"KILLPOINT_IMPORT_TIMEOUT": "2"}),
    "steps-exit-at-import": Row((*REPLAY, "--steps", "tests.gallery.invalid.exits_at_import"), "steps-import-exit",
                                ("sys.exit(0)",)),
    "steps-bad-model-script": Row((*REPLAY, "--steps", "tests.gallery.invalid.bad_model_script"), "bad-model-script",
                                  ("got int",)),
    # refused once the session has loaded the step module (its fork servers and fakes already started)
    "replay-unknown-step": Row(("replay", "--scenario", "crash-points", "--schedule", "refnd:step.start:kill"),
                               "bad-schedule", ("unknown step 'refnd'", "use one of: charge, email, plan, record, validate")),
    "previous-steps-missing": Row(("run", "--scenario", "schema-upgrade", "--previous-steps", "no.such.mod"),
                                  "bad-steps-module", ("no.such.mod",)),
    **{f"step-name-{kind}": Row(("run", "--scenario", "crash-points", "--steps",
                                 f"tests.gallery.invalid.step_name_{kind}"), "bad-step-name", ("has a step named",))
       for kind in ("colon", "comma", "space", "quote")},
    # Postgres options
    "dsn-with-owned-kind": Row((*REPLAY, "--postgres", "local", "--dsn", "postgresql://u@127.0.0.1:1/x_test"),
                               "dsn-with-owned-kind", ("--dsn was given with --postgres local",)),
    "dsn-not-test": Row((*REPLAY, "--dsn", "postgresql://u@127.0.0.1:1/orders"), "dsn-not-test", ("'orders'",)),
    "dsn-unterminated-quote": Row((*REPLAY, "--dsn", "dbname='x_test"), "dsn-invalid", ("cannot parse the DSN",)),
    "dsn-unknown-key": Row((*REPLAY, "--dsn", "nonsense_key=1 dbname=x_test"), "dsn-invalid",
                           ("cannot parse the DSN",)),
    "dsn-broken-url": Row((*REPLAY, "--dsn", "postgresql://[::1/x_test"), "dsn-invalid", ("cannot parse the DSN",)),
    "pgdatabase-not-test": Row((*REPLAY, "--dsn", "postgresql://testuser@127.0.0.1:1"), "dsn-not-test",
                               ("'prod2'",), {"PGDATABASE": "prod2"}),
    # a schedule no run can hold (each fault restarts the worker within the run's time budget)
    "schedule-of-5000-faults": Row(("replay", "--scenario", "crash-points", "--schedule",
                                    ",".join(f"plan:step.start:kill@{n}" for n in range(1, 5001))), "bad-option",
                                   ("a schedule of 5000 faults is more than the 64",)),
    # a cluster root too long for the unix sockets of the servers under it
    "pg-root-too-long-for-a-socket": Row((*REPLAY, "--postgres", "local"), "socket-path-too-long",
                                         ("KILLPOINT_PG_ROOT=", "107 bytes"),
                                         {"KILLPOINT_PG_ROOT": "/tmp/killpoint-" + "x" * 60}),
}


@pytest.mark.parametrize("name", list(ROWS))
def test_bad_input_is_one_line_and_exit_2(sandbox: Sandbox, name: str) -> None:
    row = ROWS[name]
    argv = [*row.argv, "--quiet", "--out", str(sandbox.out)] if _takes_out(row) else list(row.argv)
    proc = subprocess.run(sandbox.argv(*argv), capture_output=True, text=True, cwd=sandbox.cwd,
                          env={**sandbox.env(), **row.env}, timeout=120, stdin=subprocess.DEVNULL)
    err = proc.stderr.strip()
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], err[-2000:])
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"killpoint: error[{row.code}]: ") and ". Fix: " in err, err
    for words in row.says:
        assert words in err, err
    assert sandbox.survivors() == []
    assert sandbox.leftover_dirs() == []
    assert not sandbox.out.exists() or not any(sandbox.out.iterdir()), list(sandbox.out.iterdir())
    assert [v for v in row.env.values() if v.startswith("/tmp/") and Path(v).exists()] == []  # a root it named


def _takes_out(row: Row) -> bool:
    """Rows of the suite commands get a sandboxed --out (unless the row is about --out itself)."""
    return row.argv[0] in ("run", "replay", "explore") and "--out" not in row.argv \
        and "--bogus" not in row.argv and row.argv[-1] != "--seed"


def test_report_on_a_torn_and_corrupt_history_says_what_it_skipped(sandbox: Sandbox, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    good = ['{"type": "run.begin", "run_id": "run-1", "t": 0.0, "schedule": ""}',
            '{"type": "inc.start", "run_id": "run-1", "inc": "run-1#1", "t": 0.1, "pid": 1}',
            '{"type": "inc.end", "run_id": "run-1", "inc": "run-1#1", "t": 0.5, "exit_code": 0}']
    corrupt = ['not json at all', '[1, 2, 3]', '{"type": "point", "run_id": ["a"], "t": 0.2}',
               '{"type": "point", "run_id": "run-1", "t": "noon"}']
    (run_dir / "history.jsonl").write_text("\n".join([*good[:2], *corrupt, good[2], '{"type": "run.end", "ru']))
    (run_dir / "verdicts.json").write_text('[{"scenario": "crash-points", "outcome": ')
    proc = sandbox.run("report", str(run_dir))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    notes = [ln for ln in proc.stdout.splitlines() if ln.startswith("note: ")]
    assert any("skipped 3 unreadable line(s)" in n for n in notes), proc.stdout  # 2 junk lines + the torn last
    assert any("skipped 2 event(s)" in n for n in notes), proc.stdout
    assert any("verdicts.json is not valid JSON" in n for n in notes), proc.stdout
    html = (run_dir / "report.html").read_text()
    assert "run-1#1" in html  # the rest is drawn


def test_a_schedule_at_the_fault_bound_passes_on_the_reference_agent(sandbox: Sandbox) -> None:
    """The bound is honest: `MAX_FAULTS` faults that all fire (one kill per incarnation, at the same step)
    run to a pass on the correct agent, no false failure; one more is refused (the row above)."""
    from killpoint.cli.validate import MAX_FAULTS

    schedule = ",".join(f"email:step.start:kill@{n}" for n in range(1, MAX_FAULTS + 1))
    proc = sandbox.run("replay", "--scenario", "crash-points", "--schedule", schedule, "--out", str(sandbox.out))
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-2000:])
    assert "not fired" not in proc.stdout and "PASS" in proc.stdout, proc.stdout[-2000:]
    (run_dir,) = list(sandbox.out.iterdir())
    starts = [e for e in map(json.loads, (run_dir / "history.jsonl").read_text().splitlines())
              if e.get("type") == "inc.start" and not str(e.get("run_id", "")).startswith("baseline")]
    assert len(starts) == MAX_FAULTS + 1  # every fault fired: one incarnation each, and the one that finished
    assert sandbox.survivors() == []
    assert sandbox.leftover_dirs() == []
