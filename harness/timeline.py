"""`killpoint report RUN_DIR`: an HTML timeline of a run directory (history.jsonl + verdicts.json).

One lane per run, one row per incarnation, every point, fault and process end at its time; the
verdicts and the replay line of each failing trial above. Self-contained: no script, no network.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from harness.errors import UsageError
from harness.history import History

_COLORS = {"point": "#8aa", "fault": "#d22", "inc.start": "#2a2", "inc.end": "#555", "note": "#a80",
           "escalate": "#f0a", "thaw": "#06c", "db.down": "#d22", "db.up": "#2a2"}

_CSS = """body{font:13px system-ui,sans-serif;margin:1.5em}h2{margin-top:1.6em}
.run{border:1px solid #ccc;margin:.6em 0;padding:.4em}.lane{position:relative;height:18px;margin:2px 0;
background:#f6f6f6}.ev{position:absolute;top:2px;width:3px;height:14px}.lbl{font-size:11px;color:#333}
.pass{color:#070}.fail{color:#b00}.unknown{color:#a60}.expected{color:#06c}code{background:#eee;padding:1px 3px}
table{border-collapse:collapse}td{padding:1px 8px;vertical-align:top}"""


def render(run_dir: Path) -> Path:
    """Write `report.html` into `run_dir` and return its path. Raises UsageError if it is not a run dir."""
    history_path = run_dir / "history.jsonl"
    if not history_path.is_file():
        raise UsageError("not-a-run-dir", f"{run_dir} has no history.jsonl",
                         "give a directory under .killpoint/runs/ written by killpoint run, replay or explore")
    events = History.load(history_path)
    verdicts = json.loads((run_dir / "verdicts.json").read_text()) if (run_dir / "verdicts.json").is_file() else []
    out = [f"<!doctype html><meta charset=utf-8><title>killpoint {html.escape(run_dir.name)}</title>",
           f"<style>{_CSS}</style><h1>killpoint run {html.escape(run_dir.name)}</h1>"]
    for scenario in verdicts:
        out.append(f"<h2 class={scenario['outcome']}>{html.escape(scenario['scenario'])}"
                   f": {scenario['outcome']} ({len(scenario['trials'])} trials, {scenario['elapsed']}s)</h2><table>")
        for t in scenario["trials"]:
            bad = [v for v in t["verdicts"] if v["outcome"] != "pass"]
            detail = "; ".join(f"{v['checker']}: {v['reason']}" for v in bad)
            out.append(f"<tr><td class={t['outcome']}>{t['outcome']}</td><td><code>{html.escape(t['schedule'] or 'crash-free')}"
                       f"</code></td><td>{html.escape(t['run_id'])}</td><td>{html.escape(detail)}</td></tr>")
        out.append("</table>")
    out.append("<h2>Timelines</h2>")
    runs: dict[str, list[dict]] = {}
    for e in events:
        if e.get("run_id"):
            runs.setdefault(e["run_id"], []).append(e)
    for run_id, evs in runs.items():
        t0, t1 = evs[0]["t"], max(evs[-1]["t"], evs[0]["t"] + 1e-6)
        lanes: dict[str, list[dict]] = {}
        for e in evs:
            lanes.setdefault(e.get("inc") or "run", []).append(e)
        out.append(f"<div class=run><b>{html.escape(run_id)}</b> ({t1 - t0:.3f}s)")
        for inc, lane in lanes.items():
            out.append(f"<div class=lbl>{html.escape(inc)}</div><div class=lane>")
            for e in lane:
                left = 100.0 * (e["t"] - t0) / (t1 - t0)
                what = " ".join(str(e[k]) for k in ("type", "step", "point", "action", "note", "exit_code", "signal")
                                if e.get(k) is not None)
                color = _COLORS.get(e["type"], "#999")
                out.append(f"<span class=ev style='left:{left:.2f}%;background:{color}' "
                           f"title='{html.escape(what)} @ {e['t']:.4f}s'></span>")
            out.append("</div>")
        out.append("</div>")
    path = run_dir / "report.html"
    path.write_text("\n".join(out), encoding="utf-8")
    return path
