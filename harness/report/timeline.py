"""One run's timeline as an SVG a person reads without hovering (`killpoint report`).

1. One lane per incarnation, labelled at its left; every fault, process start and end, kill point and note
   is a tick at its time; step starts and faults carry a text label above the lane, staggered over rows so
   that labels close in time never overlap.
2. Below them a `services` lane: every attempt a fake service received and every effect it applied, at the
   time the service journalled it (an effect labelled with its service, an effect applied more than once
   marked `twice`). The services' clock is not the history's: their records are placed by the offset that
   pairs the k-th effect with the k-th `effect.applied` kill point of the run (the median over the pairs),
   else the k-th attempt with the k-th `effect.received`; a run with neither pair draws no services lane.
3. A time axis under the lanes: seconds since the run's first event, at round steps.
4. `LEGEND` names every colour used (`legend_html`).
5. Faults that last (`spans`): an outage is a band on the lane of the incarnation it hit, from the fault to
   its end (the run's next incarnation for `outage`, the N-th request of that service for `outage=N`),
   labelled with its service; a clock jump labels every later incarnation's start with the run's shift.
"""

from __future__ import annotations

import html
import math
from statistics import median

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
from killpoint.faults.points import base, clock_shift, outage_length
from killpoint.report.html_run import duplicates

COLORS = {Point.kind: "#7a9a9a", FaultFired.kind: "#d22", IncStart.kind: "#2a2", IncEnd.kind: "#555",
          Note.kind: "#a80", Escalate.kind: "#f0a", Thaw.kind: "#06c", DbDown.kind: "#b06", DbUp.kind: "#0a8",
          Attempt.kind: "#9ab", Effect.kind: "#70c"}
LEGEND = {"fault": "a fault (its action and point)", "inc.start": "a process starts", "inc.end": "a process ends",
          "point": "a kill point passed", "note": "a note from the worker (drain, fenced...)",
          "escalate": "SIGKILL after the grace", "thaw": "a stopped process thawed",
          "db.down": "Postgres down", "db.up": "Postgres up", "attempt": "a request a fake service received",
          "effect": "an effect a fake service applied", "outage": "an outage: every request of a service fails",
          "other": "anything else"}
OUTAGE_COLOR = "#f6b"
LANE, LABEL_ROW, LEFT, WIDTH, AXIS = 22, 13, 150, 1000, 26
SERVICES = "services"


def legend_html() -> str:
    """Flow step 4: the colour legend: every colour a timeline uses, with what it means."""
    items = [(OUTAGE_COLOR if k == "outage" else COLORS.get(k, "#999"), text) for k, text in LEGEND.items()]
    return "<p class=legend>" + " ".join(
        f"<span><svg width=10 height=10><rect width=10 height=10 fill='{c}'/></svg> {html.escape(t)}</span>"
        for c, t in items) + "</p>"


def _label(e: Event, shifts: dict[int, float] | None = None) -> str | None:
    if isinstance(e, FaultFired):
        return f"{str(e.action).upper()} {e.step}:{e.point}"
    if isinstance(e, Point) and e.point == "step.start":
        return str(e.step)
    if isinstance(e, IncStart) and shifts and shifts.get(id(e)):
        return f"clock {_duration(shifts[id(e)])}"
    if isinstance(e, IncEnd):
        return f"killed (signal {e.signal})" if e.signal else f"exit {e.exit_code}"
    return None


def _duration(seconds: float) -> str:
    """`+366d`, `-1h`, `+90s`: a clock shift as a person reads it."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds / size:+g}{unit}"
    return f"{seconds:+g}s"


def clock_shifts(evs: list[Event]) -> dict[int, float]:
    """Flow step 5: each incarnation start (by `id`) after a clock jump, with the run's shift by then."""
    out: dict[int, float] = {}
    shift = 0.0
    for e in evs:
        if isinstance(e, FaultFired) and base(str(e.action)) == "clock":
            shift += clock_shift(str(e.action))
        elif isinstance(e, IncStart) and shift:
            out[id(e)] = shift
    return out


def spans(evs: list[Event]) -> list[tuple[float, float, str, str]]:
    """Flow step 5: each outage as (start, end, lane, label), on the history's clock."""
    out = []
    for i, e in enumerate(evs):
        if not (isinstance(e, FaultFired) and base(str(e.action)) == "outage"):
            continue
        hit = next((p for p in reversed(evs[:i]) if isinstance(p, Point) and p.step == e.step
                    and p.point == e.point), None)
        service = str(hit.get("source")) if hit is not None else "service"
        n = outage_length(str(e.action))
        later = evs[i + 1:]
        if n is None:
            end = next((x.t for x in later if isinstance(x, IncStart)), None)
        else:
            requests = [x.t for x in later if isinstance(x, Point) and x.get("source") == service]
            end = requests[n - 2] if 0 <= n - 2 < len(requests) else (requests[-1] if n > 1 and requests else None)
        last = max((x.t for x in evs), default=e.t)
        out.append((e.t, end if end is not None else last, str(e.get("inc") or "run"), f"outage: {service}"))
    return out


def _record_time(e: ServiceRecord) -> float | None:
    t = e.record.get("t") if isinstance(e.record, dict) else None
    return float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else None


def service_offset(evs: list[Event]) -> float | None:
    """Flow step 2: what to subtract from a service record's time to put it on the history's clock."""
    for cls, point in ((Effect, "effect.applied"), (Attempt, "effect.received")):
        records = sorted(t for e in evs if isinstance(e, cls) and (t := _record_time(e)) is not None)
        points = [e.t for e in evs if isinstance(e, Point) and e.point == point]
        pairs = list(zip(records, sorted(points), strict=False))
        if pairs:
            return median(r - p for r, p in pairs)
    return None


def placed(evs: list[Event]) -> list[tuple[float, Event, str]]:
    """Every event to draw as (time on the history's clock, event, lane): control events on their
    incarnation's lane (or `run`), attempts and effects on the services lane (flow steps 1-2)."""
    out = [(e.t, e, str(e.get("inc") or "run")) for e in evs if not isinstance(e, (ServiceRecord, RunEvidence))]
    offset = service_offset(evs)
    if offset is not None:
        for e in evs:
            if isinstance(e, (Attempt, Effect)) and (t := _record_time(e)) is not None:
                out.append((t - offset, e, SERVICES))
    return out


def _service_labels(evs: list[Event]) -> dict[int, str]:
    """An effect's label: its service, `twice` when applied more than once (`html_run.duplicates`)."""
    effects = [e for e in evs if isinstance(e, Effect) and isinstance(e.record, dict)]
    dup = duplicates([e.record for e in effects])  # type: ignore[misc]
    return {id(e): f"{e.record.get('service')}{' twice' if i in dup else ''}" for i, e in enumerate(effects)}  # type: ignore[union-attr]


def _step(span: float) -> float:
    """Flow step 3: a round tick step giving about 5 to 10 ticks over `span` seconds."""
    raw = span / 6
    base = 10 ** math.floor(math.log10(raw))
    return next(m * base for m in (1, 2, 5, 10) if m * base >= raw)


def _axis(y: int, t0: float, span: float) -> list[str]:
    """Flow step 3: the time axis at height `y`."""
    parts = [f"<g class=axis><line x1='{LEFT}' y1='{y}' x2='{WIDTH - 10}' y2='{y}' stroke='#444'/>",
             f"<text x='4' y='{y + 14}' font-size='11'>seconds</text>"]
    step = _step(span)
    for k in range(int(span / step) + 1):
        x = LEFT + (WIDTH - LEFT - 10) * (k * step) / span
        parts.append(f"<line x1='{x:.1f}' y1='{y}' x2='{x:.1f}' y2='{y + 4}' stroke='#444'/>"
                     f"<text x='{x:.1f}' y='{y + 15}' font-size='10' text-anchor='middle'>{k * step:g}</text>")
    return [*parts, "</g>"]


def timeline_svg(evs: list[Event]) -> str:
    """One run's events as an SVG of labelled lanes over a time axis (flow steps 1-3)."""
    items = placed(evs)
    if not items:
        return "<p>(no events)</p>"
    t0 = min(t for t, _, _ in items)
    span = max(max(t for t, _, _ in items) - t0, 1e-6)
    lanes: dict[str, list[tuple[float, Event]]] = {}
    for t, e, lane in sorted(items, key=lambda item: item[2] == SERVICES):  # the services lane last
        lanes.setdefault(lane, []).append((t, e))
    service_labels = _service_labels(evs)
    shifts = clock_shifts(evs)
    tops: dict[str, float] = {}

    def x_of(t: float) -> float:
        return LEFT + (WIDTH - LEFT - 10) * (t - t0) / span

    parts: list[str] = []
    y = 4
    for inc, lane in lanes.items():
        rows_end: list[float] = []  # per label row, the x where its last label ends
        labels: list[tuple[float, int, str, str]] = []
        for t, e in lane:
            text = service_labels.get(id(e)) if inc == SERVICES else _label(e, shifts)
            if text is None:
                continue
            x = x_of(t)
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
        tops[inc] = top
        for t, e in lane:
            color = COLORS.get(e.kind, "#999")
            if isinstance(e, ServiceRecord):
                r = e.record or {}
                what = " ".join(str(v) for v in (e.kind, r.get("service"), f"key={r.get('key')}", r.get("outcome"))
                                if v is not None)
            else:
                what = " ".join(str(e[k]) for k in ("type", "step", "point", "action", "note", "exit_code", "signal")
                                if e.get(k) is not None)
            wide = 3 if isinstance(e, (FaultFired, IncStart, IncEnd, Effect)) else 1.5
            parts.append(f"<rect class='ev {html.escape(e.kind)}' x='{x_of(t):.1f}' y='{top + 2}' width='{wide}' "
                         f"height='{LANE - 4}' fill='{color}'><title>{html.escape(what)} @ {t - t0:.4f}s</title></rect>")
        y = top + LANE + 8
    for start, end, lane, text in spans(evs):
        if lane in tops:
            x0, x1 = x_of(start), max(x_of(end), x_of(start) + 3)
            parts.append(f"<rect class='outage' x='{x0:.1f}' y='{tops[lane] + LANE - 6}' width='{x1 - x0:.1f}' "
                         f"height='5' fill='{OUTAGE_COLOR}' opacity='0.8'><title>{html.escape(text)}</title></rect>")
    parts.extend(_axis(y, t0, span))
    y += AXIS
    return (f"<svg class=timeline xmlns='http://www.w3.org/2000/svg' width='{WIDTH}' height='{y}' "
            f"viewBox='0 0 {WIDTH} {y}' role='img'><title>timeline, {span:.3f}s</title>{''.join(parts)}</svg>")
