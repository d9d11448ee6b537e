"""docs/contracts.md lists exactly the history event kinds the harness writes, and the harness writes no
other kind (every `append` in the code names a listed kind)."""

from __future__ import annotations

import re
from pathlib import Path

from killpoint.run.history import EVENT_KINDS

REPO = Path(__file__).resolve().parents[2]


def test_the_contract_lists_exactly_the_event_kinds() -> None:
    text = (REPO / "docs" / "contracts.md").read_text()
    section = text[text.index("## 6. History events"):text.index("## 7.")]
    listed = re.findall(r"^\| `([a-z.]+)` \|", section, flags=re.M)
    assert sorted(listed) == sorted(EVENT_KINDS)


def test_every_kind_the_code_appends_is_listed() -> None:
    appended = set()
    for folder in ("harness", "scenarios"):
        for path in (REPO / folder).rglob("*.py"):
            appended |= set(re.findall(r"\.append\(\s*\"([a-z]+\.?[a-z.]*)\"\s*,\s*run_id", path.read_text()))
    assert appended, "the scan finds the appends"
    assert appended <= set(EVENT_KINDS), appended - set(EVENT_KINDS)
