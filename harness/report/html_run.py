"""The parts of `killpoint report` that show one run: its failure (evidence, replay command, a table of
attempts and effects, the tail of each worker's log) and its timeline as an SVG a person reads without
hovering.

1. `failure_section` is shown for every run whose trial did not pass: each checker that did not pass with
   its evidence lines, the replay command (from the trial's scenario, schedule and seed and the run's
   meta.json), the attempts and effects the fake services journalled (an effect applied more than once
   for one key, or with no key and the same payload, is marked `dup` and stands out in red), and the last
   lines of each incarnation's log (`<inc with # as ->.log` in the run directory).
2. `timeline_svg` draws one lane per incarnation, labelled at its left; every fault, process start and end,
   kill point and note is a tick at its time; step starts and faults carry a text label above the lane,
   staggered over rows so that labels close in time never overlap. `LEGEND` names every colour used.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from pathlib import Path

from killpoint.events import (
    Attempt,
    DbDown,
    DbUp,
    Effect,
    Escalate,
    Event,
    FaultFired,
    IncEnd,
    IncStart,
    Note,
    Point,
    RunEvidence,
    ServiceRecord,
    Thaw,
)
from killpoint.faults.schedule import Schedule, ScheduleError
from killpoint.report.text import NO_FAULT
from killpoint.run.scenario import replay_command

COLORS = {Point.kind: "#7a9a9a", FaultFired.kind: "#d22", IncStart.kind: "#2a2", IncEnd.kind: "#555",
          Note.kind: "#a80", Escalate.kind: "#f0a", Thaw.kind: "#06c", DbDown.kind: "#b06", DbUp.kind: "#0a8"}
LEGEND = {"fault": "a fault (its action and point)", "inc.start": "a process starts", "inc.end": "a process ends",
          "point": "a kill point passed", "note": "a note from the worker (drain, fenced...)",
          "escalate": "SIGKILL after the grace", "thaw": "a stopped process thawed",
          "db.down": "Postgres down", "db.up": "Postgres up", "other": "anything else"}
SERVICE_EVENTS = (ServiceRecord, RunEvidence)
"""Gathered after the run, not drawn on its timeline."""
LOG_TAIL = 15
LANE, LABEL_ROW, LEFT, WIDTH = 22, 13, 150, 1000


def legend_html() -> str:
    """The colour legend: every colour a timeline uses, with what it means."""
    items = [(COLORS.get(k, "#999"), text) for k, text in LEGEND.items()]
    return "<p class=legend>" + " ".join(
        f"<span><svg width=10 height=10><rect width=10 height=10 fill='{c}'/></svg> {html.escape(t)}</span>"
        for c, t in items) + "</p>"


def replay_for(scenario: str, trial: dict, meta: dict) -> str:
    """The replay command of a trial of verdicts.json (flow step 1)."""
    text = str(trial.get("schedule") or "")
    try:
        schedule = Schedule.parse(text) if text else None
    except ScheduleError:
        schedule = None
    seed = trial.get("seed")
    return replay_command(scenario, schedule if schedule or seed is None else None, seed if isinstance(seed, int) else None,
                          meta.get("steps") or "killpoint.reference_agent.invoice_agent", meta.get("grace"),
                          meta.get("previous_steps"), meta.get("worker_cmd"))


def duplicates(effects: list[dict]) -> set[int]:
    """Indexes of effects applied more than once: the same service and key, or no key and the same payload."""
    ident = [(e.get("service"), e.get("key")) if e.get("key") else
             (e.get("service"), json.dumps(e.get("payload"), sort_keys=True)) for e in effects]
    counts = Counter(ident)
    return {i for i, k in enumerate(ident) if counts[k] > 1}


def _cell(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return f"<td class=d>{html.escape(str(text))}</td>"


def failure_section(run_dir: Path, scenario: str, trial: dict, events: list[Event], meta: dict) -> str:
    """A failing (or undecided) run in full (flow step 1)."""
    run_id = trial["run_id"]
    out = [f"<section class=failure id='failure-{html.escape(run_id)}'>"
           f"<h3 class={html.escape(trial['outcome'])}>{html.escape(trial['outcome'].upper())}: "
           f"{html.escape(scenario)} run {html.escape(run_id)}</h3><ul class=evidence>"]
    for v in trial.get("verdicts") or []:
        if v.get("outcome") in ("pass", "n/a"):
            continue
        out.append(f"<li><b>{html.escape(str(v.get('checker')))}</b>: {html.escape(str(v.get('outcome')))}: "
                   f"{html.escape(str(v.get('reason')))}<pre>"
                   + html.escape("\n".join(str(x) for x in v.get("evidence") or [])) + "</pre></li>")
    out.append("</ul>")
    if trial.get("seed") is not None:
        out.append(f"<p>seed: <code>{html.escape(str(trial['seed']))}</code></p>")
    out.append(f"<p>schedule: <code>{html.escape(str(trial.get('schedule') or NO_FAULT))}</code></p>")
    out.append(f"<p>replay: <code class=replay>{html.escape(replay_for(scenario, trial, meta))}</code></p>")
    mine = [e for e in events if e.run_id == run_id]
    for kind, cls in (("attempt", Attempt), ("effect", Effect)):
        records = [e.record for e in mine if isinstance(e, cls) and isinstance(e.record, dict)]
        dup = duplicates(records) if cls is Effect else set()
        out.append(f"<h4>{kind}s ({len(records)})</h4><table class=records><tr><th>#</th><th>service</th><th>key</th>"
                   f"<th>{'outcome' if cls is Attempt else 'id'}</th><th>payload</th></tr>")
        for i, r in enumerate(records):
            mark = " class=dup" if i in dup else ""
            third = r.get("outcome") if cls is Attempt else r.get("id")
            out.append(f"<tr{mark}><td>{html.escape(str(r.get('order', i + 1)))}</td><td>{html.escape(str(r.get('service')))}"
                       f"</td><td>{html.escape(str(r.get('key')))}</td><td>{html.escape(str(third))}{' (duplicate)' if mark else ''}"
                       f"</td>{_cell(r.get('payload', r.get('path', '')))}</tr>")
        out.append("</table>")
    for inc in [e.inc for e in mine if isinstance(e, IncStart) and isinstance(e.inc, str)]:
        log = run_dir / (inc.replace("#", "-") + ".log")
        try:
            tail = log.read_text(errors="replace").splitlines()[-LOG_TAIL:]
        except OSError:
            tail = ["(no log)"]
        out.append(f"<h4>log of {html.escape(inc)} (last {LOG_TAIL} lines, {html.escape(log.name)})</h4>"
                   f"<pre class=log>{html.escape(chr(10).join(tail))}</pre>")
    out.append("</section>")
    return "".join(out)


def _label(e: Event) -> str | None:
    if isinstance(e, FaultFired):
        return f"{str(e.action).upper()} {e.step}:{e.point}"
    if isinstance(e, Point) and e.point == "step.start":
        return str(e.step)
    if isinstance(e, IncEnd):
        return f"killed (signal {e.signal})" if e.signal else f"exit {e.exit_code}"
    return None


def timeline_svg(evs: list[Event]) -> str:
    """One run's control events as an SVG of labelled lanes (flow step 2)."""
    evs = [e for e in evs if not isinstance(e, SERVICE_EVENTS)]
    if not evs:
        return "<p>(no events)</p>"
    t0 = min(e.t for e in evs)
    span = max(max(e.t for e in evs) - t0, 1e-6)
    lanes: dict[str, list[Event]] = {}
    for e in evs:
        lanes.setdefault(str(e.get("inc") or "run"), []).append(e)
    parts: list[str] = []
    y = 4
    for inc, lane in lanes.items():
        rows_end: list[float] = []  # per label row, the x where its last label ends
        labels: list[tuple[float, int, str, str]] = []
        for e in lane:
            text = _label(e)
            if text is None:
                continue
            x = LEFT + (WIDTH - LEFT - 10) * (e.t - t0) / span
            width = 6.5 * len(text) + 6
            row = next((r for r, end in enumerate(rows_end) if end <= x), len(rows_end))
            if row == len(rows_end):
                rows_end.append(0.0)
            rows_end[row] = x + width
            labels.append((x, row, text, COLORS.get(e.kind, "#999")))
        top = y + LABEL_ROW * len(rows_end)
        for x, row, text, color in labels:
            ly = top - LABEL_ROW * row - 3
            parts.append(f"<text x='{x:.1f}' y='{ly}' font-size='11' fill='{color}'>{html.escape(text)}</text>")
        parts.append(f"<text x='4' y='{top + 15}' font-size='12' class=lane-label>{html.escape(inc)}</text>")
        parts.append(f"<rect x='{LEFT}' y='{top}' width='{WIDTH - LEFT}' height='{LANE}' fill='#f4f4f4'/>")
        for e in lane:
            x = LEFT + (WIDTH - LEFT - 10) * (e.t - t0) / span
            color = COLORS.get(e.kind, "#999")
            what = " ".join(str(e[k]) for k in ("type", "step", "point", "action", "note", "exit_code", "signal")
                            if e.get(k) is not None)
            wide = 3 if isinstance(e, (FaultFired, IncStart, IncEnd)) else 1.5
            parts.append(f"<rect x='{x:.1f}' y='{top + 2}' width='{wide}' height='{LANE - 4}' fill='{color}'>"
                         f"<title>{html.escape(what)} @ {e.t - t0:.4f}s</title></rect>")
        y = top + LANE + 8
    return (f"<svg class=timeline xmlns='http://www.w3.org/2000/svg' width='{WIDTH}' height='{y}' "
            f"viewBox='0 0 {WIDTH} {y}' role='img'><title>timeline, {span:.3f}s</title>{''.join(parts)}</svg>")
