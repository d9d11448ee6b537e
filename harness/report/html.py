"""`killpoint report RUN_DIR`: an HTML timeline of a run directory (history.jsonl + verdicts.json).

The run's metadata (`meta.json`: command, step module and digest, seed, killpoint's version, Python,
platform...), a summary table of the scenarios (naming the runs that failed), then each scenario's trials
(the non-passing first, opened), then the failing runs, one per cause (`report.causes`; `html_run.
failure_section`: evidence, replay command, a link to its timeline, attempts and effects, log tails; where
else the cause was met, linked), then one SVG timeline per run (`timeline.timeline_svg`: labelled lanes,
steps, faults, attempts and effects, a time axis; the timelines of failing runs opened). Self-contained: no
script, no network.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from killpoint.errors import UsageError
from killpoint.events import Event
from killpoint.report.causes import from_record, group
from killpoint.report.html_run import failure_section
from killpoint.report.timeline import legend_html, timeline_svg
from killpoint.run.history import History

_CSS = """body{font:13px system-ui,sans-serif;margin:1.5em}h2{margin-top:1.6em}
.run{border:1px solid #ccc;margin:.6em 0;padding:.4em}.lane{position:relative;height:18px;margin:2px 0;
background:#f6f6f6}.ev{position:absolute;top:2px;width:3px;height:14px}.lbl{font-size:11px;color:#333}
.pass{color:#070}.fail{color:#b00}.unknown{color:#a60}.expected{color:#06c}code{background:#eee;padding:1px 3px}
table{border-collapse:collapse}td,th{padding:1px 8px;vertical-align:top;text-align:left}
td{white-space:nowrap}td.d{white-space:normal;overflow-wrap:anywhere}details{margin:.5em 0}summary{font-weight:bold;cursor:pointer}
.summary{margin-bottom:1em}.summary th{border-bottom:1px solid #999}
tr.dup td{background:#fdd;color:#900;font-weight:bold}pre{background:#f7f7f7;padding:4px;margin:2px 0;white-space:pre-wrap}
.failure{border-left:4px solid #b00;padding-left:.8em;margin:1.2em 0}.records th{border-bottom:1px solid #999}
.legend span{margin-right:1.2em;white-space:nowrap}svg.timeline{display:block;margin:.4em 0}
table.meta th{text-align:left;padding-right:1em;color:#555}p.also{margin:.2em 0 1.2em 1.2em}"""


def render(run_dir: Path) -> Path:
    """Write `report.html` into `run_dir` and return its path. Raises UsageError if it is not a run dir."""
    return draw(run_dir)[0]


def _meta(run_dir: Path) -> dict:
    """meta.json of the run directory (steps, grace... for the replay commands), or {} if unreadable."""
    try:
        data = json.loads((run_dir / "meta.json").read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


META_FIRST = ("command", "steps", "steps_digest", "seed", "killpoint", "python", "platform")
"""The metadata shown first, in this order; any other scalar key of meta.json follows, sorted."""


def meta_table(meta: dict) -> str:
    """The run's metadata as a table (`meta.json`'s scalar values, `none` for a first key without one, e.g. the
    seed of an explicit schedule; lists and objects are left out)."""
    keys = [k for k in META_FIRST if k in meta] + sorted(k for k in meta if k not in META_FIRST)
    rows = "".join(f"<tr><th>{html.escape(str(k))}</th><td class=d>{html.escape('none' if meta[k] is None else str(meta[k]))}"
                   "</td></tr>" for k in keys
                   if isinstance(meta[k], (str, int, float, bool)) or (meta[k] is None and k in META_FIRST))
    return f"<table class=meta>{rows}</table>" if rows else "<p>(no meta.json)</p>"


def _drawable(events: list[Event]) -> tuple[list[Event], int]:
    """The events a timeline can place (a numeric time; a run id, if any, that is a string), and how many
    others there were (a corrupt history's lines may parse as JSON and still make no sense)."""
    good = [e for e in events if isinstance(e.t, (int, float)) and not isinstance(e.t, bool)
            and (e.run_id is None or isinstance(e.run_id, str))]
    return good, len(events) - len(good)


def _verdicts(run_dir: Path) -> tuple[list[dict], str | None]:
    """`verdicts.json` if it is there and readable as the list it should be; else [] and why not."""
    path = run_dir / "verdicts.json"
    if not path.is_file():
        return [], None
    try:
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except ValueError as exc:
        return [], f"{path} is not valid JSON ({exc}); the verdict tables are left out"
    ok = isinstance(data, list) and all(
        isinstance(sc, dict) and isinstance(sc.get("scenario"), str) and isinstance(sc.get("outcome"), str)
        and isinstance(sc.get("trials"), list)
        and all(isinstance(t, dict) and isinstance(t.get("run_id"), str) and isinstance(t.get("outcome"), str)
                and isinstance(t.get("verdicts"), list) and all(isinstance(v, dict) for v in t["verdicts"])
                for t in sc["trials"]) for sc in data)
    return (data, None) if ok else ([], f"{path} is not in the shape killpoint writes; the verdict tables are left out")


def _failures(run_dir: Path, verdicts: list[dict], events: list[Event], meta: dict) -> list[str]:
    """The failing runs, one section per cause (`report.causes`): its representative in full, then a line
    naming where else it was met, each run linked to its timeline."""
    findings = [from_record(sc["scenario"], sc["outcome"], t) for sc in verdicts
                for t in sorted(sc["trials"], key=lambda t: (t["outcome"] != "fail", str(t.get("schedule") or "").count(",")))
                if t["outcome"] not in ("pass", "n/a")]
    if not findings:
        return []
    groups = group(findings)
    out = [f"<h2>Failures ({len(findings)} runs, {len(groups)} cause{'s' if len(groups) != 1 else ''})</h2>"]
    for g in groups:
        rep = g.representative
        out.append(failure_section(run_dir, rep.scenario, rep.ref, events, meta))  # type: ignore[arg-type]
        also = g.also_line()
        if also:
            runs = ", ".join(f"<a href='#run-{html.escape(f.run_id)}' id='failure-{html.escape(f.run_id)}'>"
                             f"{html.escape(f.scenario)} {html.escape(f.run_id)}</a> <code>{html.escape(f.schedule)}</code>"
                             for f in g.others)
            out.append(f"<p class=also>{html.escape(also)}: {runs}</p>")
    return out


def draw(run_dir: Path) -> tuple[Path, list[str]]:
    """`render`, and what it had to skip of a torn or corrupt run directory, one line each."""
    history_path = run_dir / "history.jsonl"
    if not history_path.is_file():
        raise UsageError("not-a-run-dir", f"{run_dir} has no history.jsonl",
                         "give a directory under .killpoint/runs/ written by killpoint run, replay or explore")
    events, torn = History.read(history_path)
    events, odd = _drawable(events)
    notes = [f"skipped {torn} unreadable line(s) of {history_path} (a killed run tears its last line)"] if torn else []
    if odd:
        notes.append(f"skipped {odd} event(s) of {history_path} without a time or with a malformed run id")
    verdicts, why = _verdicts(run_dir)
    if why:
        notes.append(why)
    meta = _meta(run_dir)
    out = [f"<!doctype html><html lang=en><meta charset=utf-8><title>killpoint {html.escape(run_dir.name)}</title>",
           f"<style>{_CSS}</style><h1>killpoint run {html.escape(run_dir.name)}</h1>", meta_table(meta),
           "<table class=summary><tr><th>scenario</th><th>outcome</th><th>trials</th><th>seconds</th>"
           "<th>failed runs</th></tr>"]
    for sc in verdicts:
        failed = [t["run_id"] for t in sc["trials"] if t["outcome"] not in ("pass", "n/a")]
        links = ", ".join(f"<a href='#failure-{html.escape(r)}'>{html.escape(r)}</a>" for r in failed) or "none"
        out.append(f"<tr><td><a href='#{html.escape(sc['scenario'])}'>{html.escape(sc['scenario'])}</a></td>"
                   f"<td class={html.escape(sc['outcome'])}>{html.escape(sc['outcome'])}</td><td>{len(sc['trials'])}</td>"
                   f"<td>{html.escape(str(sc.get('elapsed', '')))}</td><td class=d>{links}</td></tr>")
    out.append("</table>")
    bad_runs: set[str] = set()
    for sc in verdicts:
        trials = sorted(sc["trials"], key=lambda t: t["outcome"] == "pass")  # the non-passing first
        opened = " open" if sc["outcome"] not in ("pass", "skipped") else ""
        out.append(f"<details{opened} id='{html.escape(sc['scenario'])}'><summary class={html.escape(sc['outcome'])}>"
                   f"{html.escape(sc['scenario'])}: {html.escape(sc['outcome'])} ({len(trials)} trials, "
                   f"{html.escape(str(sc.get('elapsed', '')))}s)"
                   "</summary><table>")
        for t in trials:
            bad = [v for v in t["verdicts"] if v.get("outcome") not in ("pass", "n/a")]
            if bad:
                bad_runs.add(t["run_id"])
            detail = "; ".join(f"{v.get('checker')}: {v.get('reason')}" for v in bad)
            out.append(f"<tr><td class={html.escape(t['outcome'])}>{html.escape(t['outcome'])}</td>"
                       f"<td><code>{html.escape(str(t.get('schedule') or 'crash-free'))}"
                       f"</code></td><td><a href='#run-{html.escape(t['run_id'])}'>{html.escape(t['run_id'])}</a></td>"
                       f"<td class=d>{html.escape(detail)}</td></tr>")
        out.append("</table></details>")
    out.extend(_failures(run_dir, verdicts, events, meta))
    runs: dict[str, list[Event]] = {}
    for e in events:
        if e.run_id:
            runs.setdefault(e.run_id, []).append(e)
    out.append("<h2>Timelines</h2><p>One lane per incarnation (named at its left); step starts, faults and "
               "process ends are labelled above their lane; the fake services' attempts and effects are on the "
               "services lane; seconds since the run began run along the axis.</p>" + legend_html())
    for run_id, evs in runs.items():
        mark = " (failed)" if run_id in bad_runs else ""
        out.append(f"<details{' open' if run_id in bad_runs else ''} id='run-{html.escape(run_id)}'>"
                   f"<summary>{html.escape(run_id)}{mark}</summary>{timeline_svg(evs)}</details>")
    path = run_dir / "report.html"
    path.write_text("\n".join(out), encoding="utf-8")
    return path, notes
