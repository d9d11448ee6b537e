"""Checkers of schema drift: refuses_newer_version and migrates_older_version."""

from __future__ import annotations

from killpoint.checkers.evidence import Evidence
from killpoint.checkers.verdict import Verdict, failed, passed, unknown

REFUSED_EXIT = 3


def refuses_newer_version(ev: Evidence, base: Evidence | None) -> Verdict:
    """A checkpoint from newer code is refused: exit 3, row unchanged, no model call, no effect.

    Needs the scenario's `extra["seeded_raw"]`: the stored text of the newer checkpoint before the run.
    """
    seeded = ev.extra.get("seeded_raw")
    if seeded is None:
        return unknown("refuses_newer_version", "no newer checkpoint was seeded for this run")
    lines = []
    codes = [i.get("exit_code") for i in ev.incarnations]
    if not codes or any(c != REFUSED_EXIT for c in codes):
        lines.append(f"worker exit codes {codes}, expected {REFUSED_EXIT} (refused)")
    if ev.final_raw != seeded:
        lines.append("the checkpoint row changed")
    if ev.model_requests:
        lines.append(f"{len(ev.model_requests)} model request(s) made")
    if ev.effects or any(a.get("outcome") != "rejected" for a in ev.attempts):
        lines.append(f"{len(ev.attempts)} service attempt(s), {len(ev.effects)} effect(s)")
    if lines:
        return failed("refuses_newer_version", "a newer checkpoint was not refused cleanly", lines)
    return passed("refuses_newer_version", "refused with exit 3; row, model and services untouched")


def migrates_older_version(ev: Evidence, base: Evidence | None) -> Verdict:
    """A checkpoint from older code is migrated and finished at the current version, never refused.

    Needs the scenario's `extra["state_version"]` (the code's) and `extra["seeded_version"]` (the old one).
    """
    current, old = ev.extra.get("state_version"), ev.extra.get("seeded_version")
    if current is None or old is None:
        return unknown("migrates_older_version", "no older checkpoint was seeded for this run")
    refused = [i for i in ev.incarnations if i.get("exit_code") == REFUSED_EXIT]
    if refused:
        return failed("migrates_older_version", f"a version-{old} checkpoint was refused by version-{current} code",
                      [f"{i.get('inc')} exited {REFUSED_EXIT}" for i in refused])
    if ev.final is None or ev.final.get("version") != current:
        got = None if ev.final is None else ev.final.get("version")
        return failed("migrates_older_version", f"final checkpoint is at version {got}, expected {current}")
    return passed("migrates_older_version", f"version {old} migrated to {current} and finished")
