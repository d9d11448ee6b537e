"""`killpoint report RUN_DIR`: an HTML timeline of a run directory (history.jsonl + verdicts.json).

A summary table of the scenarios, then each scenario's trials (the non-passing first, opened), then one
timeline per run: a lane per incarnation, every point, fault and process end at its time (the timelines of
failing runs opened). Self-contained: no script, no network.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from killpoint.errors import UsageError
from killpoint.run.history import History

_COLORS = {"point": "#8aa", "fault": "#d22", "inc.start": "#2a2", "inc.end": "#555", "note": "#a80",
           "escalate": "#f0a", "thaw": "#06c", "db.down": "#d22", "db.up": "#2a2"}

_CSS = """body{font:13px system-ui,sans-serif;margin:1.5em}h2{margin-top:1.6em}
.run{border:1px solid #ccc;margin:.6em 0;padding:.4em}.lane{position:relative;height:18px;margin:2px 0;
background:#f6f6f6}.ev{position:absolute;top:2px;width:3px;height:14px}.lbl{font-size:11px;color:#333}
.pass{color:#070}.fail{color:#b00}.unknown{color:#a60}.expected{color:#06c}code{background:#eee;padding:1px 3px}
table{border-collapse:collapse}td,th{padding:1px 8px;vertical-align:top;text-align:left}
td{white-space:nowrap}td.d{white-space:normal;overflow-wrap:anywhere}details{margin:.5em 0}summary{font-weight:bold;cursor:pointer}
.summary{margin-bottom:1em}.summary th{border-bottom:1px solid #999}"""


def render(run_dir: Path) -> Path:
    """Write `report.html` into `run_dir` and return its path. Raises UsageError if it is not a run dir."""
    history_path = run_dir / "history.jsonl"
    if not history_path.is_file():
        raise UsageError("not-a-run-dir", f"{run_dir} has no history.jsonl",
                         "give a directory under .killpoint/runs/ written by killpoint run, replay or explore")
    events = History.load(history_path)
    verdicts = json.loads((run_dir / "verdicts.json").read_text()) if (run_dir / "verdicts.json").is_file() else []
    out = [f"<!doctype html><meta charset=utf-8><title>killpoint {html.escape(run_dir.name)}</title>",
           f"<style>{_CSS}</style><h1>killpoint run {html.escape(run_dir.name)}</h1>",
           "<table class=summary><tr><th>scenario</th><th>outcome</th><th>trials</th><th>seconds</th></tr>"]
    for sc in verdicts:
        out.append(f"<tr><td><a href='#{html.escape(sc['scenario'])}'>{html.escape(sc['scenario'])}</a></td>"
                   f"<td class={sc['outcome']}>{sc['outcome']}</td><td>{len(sc['trials'])}</td><td>{sc['elapsed']}</td></tr>")
    out.append("</table>")
    bad_runs: set[str] = set()
    for sc in verdicts:
        trials = sorted(sc["trials"], key=lambda t: t["outcome"] == "pass")  # the non-passing first
        opened = " open" if sc["outcome"] not in ("pass", "skipped") else ""
        out.append(f"<details{opened} id='{html.escape(sc['scenario'])}'><summary class={sc['outcome']}>"
                   f"{html.escape(sc['scenario'])}: {sc['outcome']} ({len(trials)} trials, {sc['elapsed']}s)"
                   "</summary><table>")
        for t in trials:
            bad = [v for v in t["verdicts"] if v["outcome"] != "pass"]
            if bad:
                bad_runs.add(t["run_id"])
            detail = "; ".join(f"{v['checker']}: {v['reason']}" for v in bad)
            out.append(f"<tr><td class={t['outcome']}>{t['outcome']}</td><td><code>{html.escape(t['schedule'] or 'crash-free')}"
                       f"</code></td><td><a href='#run-{html.escape(t['run_id'])}'>{html.escape(t['run_id'])}</a></td>"
                       f"<td class=d>{html.escape(detail)}</td></tr>")
        out.append("</table></details>")
    runs: dict[str, list[dict]] = {}
    for e in events:
        if e.get("run_id"):
            runs.setdefault(e["run_id"], []).append(e)
    out.append("<h2>Timelines</h2><p>One lane per incarnation; hover a mark for the event. "
               "Red: a fault; green: a process start; grey: its end; blue-grey: a kill point passed.</p>")
    for run_id, evs in runs.items():
        out.append(f"<details{' open' if run_id in bad_runs else ''} id='run-{html.escape(run_id)}'>"
                   f"<summary>{html.escape(run_id)}</summary>{_lanes(evs)}</details>")
    path = run_dir / "report.html"
    path.write_text("\n".join(out), encoding="utf-8")
    return path


def _lanes(evs: list[dict]) -> str:
    """One run's events as lanes, one per incarnation, positioned by time."""
    t0, t1 = evs[0]["t"], max(evs[-1]["t"], evs[0]["t"] + 1e-6)
    lanes: dict[str, list[dict]] = {}
    for e in evs:
        lanes.setdefault(e.get("inc") or "run", []).append(e)
    out = [f"<div class=run>{t1 - t0:.3f}s"]
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
    return "".join(out)
