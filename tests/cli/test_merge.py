"""`killpoint merge`: the shards of one exploration, merged, are the unsharded exploration.

Through the CLI: `explore --scenario crash-points --exhaustive --seed S` on an agent whose email has no
idempotency key (so trials both pass and fail), once whole and as shards 1/2 and 2/2; `killpoint merge` of
the two shards gives the unsharded run's verdicts (every schedule, its outcome and every checker's), one
JUnit file with the unsharded run's testcase names, an HTML report, and a run directory `killpoint judge`
reads back to the same verdicts. Then, from run directories written by hand: what a merge decides on its
own (outcomes, renamed run ids, refusals), and that shards drawing from one base seed partition the plan.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from killpoint.cli.main import main
from killpoint.env.postgres import PostgresHandle
from killpoint.faults.schedule import exhaustive, fault_budget, random_schedules
from killpoint.faults.shard import Shard
from tests.helpers.checks import describe
from tests.helpers.harness import BROKEN_AGENT
from tests.helpers.sandbox import Sandbox

SEED = "20260601"


def trials(run_dir: Path) -> list[tuple]:
    """Every trial of a run directory as (scenario, schedule, seed, outcome, each checker's outcome), sorted:
    what must not depend on how the schedules were split (run ids and times do)."""
    out = []
    for sc in json.loads((run_dir / "verdicts.json").read_text()):
        for t in sc["trials"]:
            out.append((sc["scenario"], t["schedule"], t["seed"], t["outcome"],
                        tuple((v["checker"], v["outcome"]) for v in t["verdicts"])))
    return sorted(out)


def the_run_dir(out: Path) -> Path:
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    return run_dir


@pytest.mark.slow  # three CLI explorations of 46 single faults each
def test_shards_merged_are_the_unsharded_exploration(pg_server: PostgresHandle, sandbox: Sandbox) -> None:
    runs, codes = {}, {}
    for label, shard in (("whole", None), ("s1", "1/2"), ("s2", "2/2")):
        db = f"test_merge_{label}"
        dsn = pg_server.create_database(db)  # a database each: every invocation numbers its runs from 1
        try:
            proc = sandbox.run("explore", "--scenario", "crash-points", "--exhaustive", "--seed", SEED,
                               "--steps", BROKEN_AGENT, "--dsn", dsn, "--allow-any-dsn", "--no-store", "--quiet",
                               "--out", str(sandbox.out / label), "--junit", str(sandbox.root / f"{label}.xml"),
                               *(("--shard", shard) if shard else ()), timeout=600)
        finally:
            pg_server.drop_database(db)
        assert proc.returncode in ((1,) if label == "whole" else (0, 1)), describe(proc)  # a shard may pass
        codes[label] = proc.returncode
        runs[label] = the_run_dir(sandbox.out / label)
    assert 1 in (codes["s1"], codes["s2"])  # the failures are in some shard
    assert trials(runs["s1"]) and trials(runs["s2"])
    assert not {t[1] for t in trials(runs["s1"])} & {t[1] for t in trials(runs["s2"])}

    merged_xml = sandbox.root / "merged.xml"
    proc = sandbox.run("merge", str(sandbox.out / "s1"), str(runs["s2"]), "--out", str(sandbox.out / "merged"),
                       "--junit", str(merged_xml))
    assert proc.returncode == 1, describe(proc)  # the shards' failures are the merge's
    merged = the_run_dir(sandbox.out / "merged")
    assert trials(merged) == trials(runs["whole"])
    assert {t[3] for t in trials(merged)} == {"pass", "fail"}
    assert "FAIL     crash-points" in proc.stdout and f"run directory: {merged}" in proc.stdout, describe(proc)

    def cases(path: Path) -> list[tuple[str | None, str | None, bool]]:
        root = ET.parse(path).getroot()
        return sorted((c.get("name"), c.get("classname"), c.find("failure") is not None) for c in root.iter("testcase"))

    assert cases(merged_xml) == cases(sandbox.root / "whole.xml")
    assert (merged / "report.html").is_file() and "crash-points" in (merged / "report.html").read_text()
    meta = json.loads((merged / "meta.json").read_text())
    assert meta["command"] == "merge" and meta["seed"] == int(SEED) and meta["steps"] == BROKEN_AGENT

    judged = sandbox.run("judge", str(merged))
    assert judged.returncode == 0 and "every recorded verdict reproduced" in judged.stdout, describe(judged)
    assert sandbox.survivors() == [] and sandbox.leftover_dirs() == []


# ---- run directories written by hand ---------------------------------------------------------------------

def verdict(outcome: str, evidence: tuple[str, ...] = ()) -> dict:
    return {"checker": "exactly_once", "outcome": outcome, "reason": outcome, "evidence": list(evidence)}


def write_run_dir(path: Path, scenarios: list[dict], meta: dict, events: list[dict] = ()) -> Path:
    path.mkdir(parents=True)
    (path / "verdicts.json").write_text(json.dumps(scenarios))
    (path / "meta.json").write_text(json.dumps(meta))
    (path / "history.jsonl").write_text("".join(json.dumps({"i": i, **e}) + "\n" for i, e in enumerate(events)))
    return path


def scenario(name: str, outcome: str, trials_: list[dict], reason: str = "") -> dict:
    return {"scenario": name, "outcome": outcome, "reason": reason, "cut": "", "elapsed": 1.0, "trials": trials_}


def trial(run_id: str, schedule: str, outcome: str, evidence: tuple[str, ...] = ()) -> dict:
    return {"run_id": run_id, "schedule": schedule, "seed": None, "outcome": outcome,
            "verdicts": [verdict(outcome, evidence)]}


META = {"command": "explore", "seed": 7, "steps": "my.steps", "steps_digest": "abc"}


def merge(tmp_path: Path, *dirs: Path, capsys: pytest.CaptureFixture) -> tuple[int, Path, str]:
    code = main(["merge", *map(str, dirs), "--out", str(tmp_path / "merged"), "--junit", str(tmp_path / "j.xml")])
    return code, the_run_dir(tmp_path / "merged"), capsys.readouterr().out


def test_a_scenario_is_as_bad_as_its_worst_shard_and_a_shard_that_left_it_says_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    one = write_run_dir(tmp_path / "runs1" / "a", [
        scenario("crash-points", "pass", [trial("crash-points-1", "email:step.start:kill", "pass")]),
        scenario("fleet", "skipped", [], "--shard: all 1 of its trials run in other shards"),
        scenario("deploy-drain", "skipped", [], "needs docker")], META)
    two = write_run_dir(tmp_path / "runs2" / "b", [
        scenario("crash-points", "fail", [trial("crash-points-1", "email:effect.applied:kill", "fail")]),
        scenario("fleet", "pass", [trial("fleet-1", "", "pass")]),
        scenario("deploy-drain", "skipped", [], "needs docker")], META)
    code, merged, out = merge(tmp_path, tmp_path / "runs1", two, capsys=capsys)  # a folder of run dirs, a run dir
    assert code == 1, out
    verdicts = {sc["scenario"]: sc for sc in json.loads((merged / "verdicts.json").read_text())}
    assert verdicts["crash-points"]["outcome"] == "fail" and len(verdicts["crash-points"]["trials"]) == 2
    assert verdicts["fleet"]["outcome"] == "pass" and verdicts["fleet"]["reason"] == ""
    assert verdicts["deploy-drain"]["outcome"] == "skipped" and verdicts["deploy-drain"]["reason"] == "needs docker"
    assert verdicts["crash-points"]["elapsed"] == 2.0
    root = ET.parse(tmp_path / "j.xml").getroot()
    assert root.get("failures") == "1" and root.get("skipped") == "1" and root.get("tests") == "4"
    assert str(one) in out and str(two) in out


def test_a_run_id_two_shards_share_is_renamed_everywhere_it_stands(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture) -> None:
    def events(run_id: str) -> list[dict]:
        return [{"t": 1.0, "type": "run.begin", "run_id": run_id, "schedule": ""},
                {"t": 1.1, "type": "inc.start", "run_id": run_id, "inc": f"{run_id}#1"},
                {"t": 1.2, "type": "run.evidence", "run_id": run_id, "crashes": {f"{run_id}#1": {"log": "x"}}},
                {"t": 1.3, "type": "effect", "run_id": run_id, "of": 2, "record": {"key": f"{run_id}:email"}}]

    dirs = []
    for k in (1, 2):
        d = write_run_dir(tmp_path / f"s{k}", [scenario("crash-points", "fail", [
            trial("crash-points-1", "email:step.start:kill", "fail", ("extra x1: mailer key crash-points-1:email",
                                                                     "not crash-points-10 nor crash-points-1.gw1"))])],
            META, events("crash-points-1") + ([] if k == 1 else events("crash-points-2")))
        (d / "crash-points-1-1.log").write_text(f"shard {k}\n")
        dirs.append(d)
    code, merged, out = merge(tmp_path, *dirs, capsys=capsys)
    assert code == 1, out
    history = [json.loads(line) for line in (merged / "history.jsonl").read_text().splitlines()]
    assert [e["i"] for e in history] == list(range(12))
    second = [e for e in history if e["run_id"] == "crash-points-1.2"]
    assert second[1]["inc"] == "crash-points-1.2#1" and list(second[2]["crashes"]) == ["crash-points-1.2#1"]
    assert second[3]["record"]["key"] == "crash-points-1.2:email" and second[3]["of"] == second[2]["i"] == 6
    assert [e["run_id"] for e in history if e["type"] == "run.begin"] == ["crash-points-1.1", "crash-points-1.2",
                                                                          "crash-points-2"]
    (sc,) = json.loads((merged / "verdicts.json").read_text())
    assert [t["run_id"] for t in sc["trials"]] == ["crash-points-1.1", "crash-points-1.2"]
    assert sc["trials"][1]["verdicts"][0]["evidence"] == ["extra x1: mailer key crash-points-1.2:email",
                                                          "not crash-points-10 nor crash-points-1.gw1"]
    assert (merged / "crash-points-1.2-1.log").read_text() == "shard 2\n"
    assert (merged / "crash-points-1.1-1.log").read_text() == "shard 1\n"


def test_runs_of_different_agents_are_refused_and_different_seeds_are_said(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture) -> None:
    a = write_run_dir(tmp_path / "a", [scenario("crash-points", "pass", [])], META)
    b = write_run_dir(tmp_path / "b", [scenario("crash-points", "pass", [])], {**META, "steps_digest": "def"})
    assert main(["merge", str(a), str(b), "--out", str(tmp_path / "m")]) == 2
    assert "error[merge-mismatch]" in capsys.readouterr().err and not (tmp_path / "m").exists()
    c = write_run_dir(tmp_path / "c", [scenario("crash-points", "pass", [])], {**META, "seed": 8})
    assert main(["merge", str(a), str(c), "--out", str(tmp_path / "m")]) == 0
    assert "different base seeds (7, 8)" in capsys.readouterr().out
    assert main(["merge", str(a), str(tmp_path / "a"), "--out", str(tmp_path / "m2")]) == 2
    assert "error[merge-twice]" in capsys.readouterr().err
    assert main(["merge", str(tmp_path / "nothing-here"), "--out", str(tmp_path / "m3")]) == 2
    assert "error[not-a-run-dir]" in capsys.readouterr().err


def test_shards_drawing_from_one_base_seed_partition_the_plan() -> None:
    """What `Scenario.in_shard` keeps of a plan: one base seed gives every shard the same plan (the exhaustive
    part, then the random part, each random schedule with its own seed), and `Shard.owns` gives each trial
    to exactly one shard."""
    points = {"plan": ["step.start", "model.request"], "charge": ["step.start", "effect.applied"],
              "email": ["effect.received", "effect.applied", "checkpoint.committed"]}
    plan = [(s, None) for s in exhaustive(points)] + [
        (s, seed) for seed, s in random_schedules(1234, 40, points, max_faults=fault_budget(points))]
    for count in (2, 3):
        shards = [Shard(k, count) for k in range(1, count + 1)]
        owners = [[sh for sh in shards if sh.owns("crash-points", s, seed)] for s, seed in plan]
        assert all(len(o) == 1 for o in owners)
        assert all(any(o == [sh] for o in owners) for sh in shards)  # each shard gets a share
    other = random_schedules(99, 40, points, max_faults=fault_budget(points))
    assert [s for _, s in other] != [s for s, seed in plan if seed is not None]  # a seed each: no one plan
