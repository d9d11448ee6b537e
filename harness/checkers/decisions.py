"""decisions_hold: no effect was made on a model's answer that the run later asked again and replaced.

Anchor: a durable agent must checkpoint a decision before the effect it gates. With a model that samples
(`fake_services/sampling.py`), a step resumed after a crash that asks the same question again may hear
another answer; if the step had already acted on the first one (charged because "approve") and the run then
goes on under the second ("review"), its effects and its recorded decision disagree.

The rule, on the run's own records: for each request the model answered twice or more with different texts,
every effect applied after an answer and before the same request was answered differently was made under an
answer the run did not keep. It fails naming the effect, both answers and where the final state stands
(which answer it records, when it records either). n/a when no request was answered differently (nothing to
relate: the model never changed its mind in this run).
"""

from __future__ import annotations

import json
from typing import Any

from killpoint.checkers.evidence import Evidence
from killpoint.checkers.verdict import Verdict, failed, not_applicable, passed

NAME = "decisions_hold"


def _changes(requests: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(earlier answer, later different answer) of each request the model answered differently, in order."""
    last: dict[str, dict[str, Any]] = {}
    out = []
    for r in sorted(requests, key=lambda r: r.get("order") or 0):
        if r.get("outcome") != "applied":
            continue
        digest = r.get("request_digest")
        before = last.get(digest)
        if before is not None and before.get("response_text") != r.get("response_text"):
            out.append((before, r))
        last[digest] = r
    return out


def _kept(final: Any, text: str | None) -> bool:
    """Whether the final state records the answer `text` (itself, or the verdict it ends with)."""
    if not text or final is None:
        return False
    blob = json.dumps(final, sort_keys=True)
    verdict = text.rsplit("verdict=", 1)[-1] if "verdict=" in text else None
    return text in blob or (verdict is not None and f'"{verdict}"' in blob)


def decisions_hold(ev: Evidence, base: Evidence | None = None) -> Verdict:
    """See the module docstring."""
    changes = _changes(ev.model_requests)
    if not changes:
        return not_applicable(NAME, "the model answered no request of this run differently")
    lines = []
    for first, second in changes:
        made = [e for e in ev.effects if first["order"] < (e.get("order") or 0) < second["order"]]
        for e in made:
            where = ("the final state records the later answer" if _kept(ev.final, second.get("response_text"))
                     else "the final state records the earlier answer" if _kept(ev.final, first.get("response_text"))
                     else "the final state records neither")
            lines.append(f"{e.get('service')} {e.get('endpoint') or ''} key={e.get('key')} (effect #{e.get('order')}) "
                         f"made after the model answered {first.get('response_text')!r} (#{first['order']}); "
                         f"the same request was answered {second.get('response_text')!r} (#{second['order']}); "
                         f"{where}")
    if lines:
        return failed(NAME, "an effect was made on a decision the run did not checkpoint: the step asked again "
                            "and went on under another answer", lines)
    return passed(NAME, f"{len(changes)} request(s) answered differently on resume; no effect was made on a "
                        "replaced answer")
