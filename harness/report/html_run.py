"""The part of `killpoint report` that shows one failing run: its evidence, replay command, a table of
attempts and effects, the tail of each worker's log (its timeline: `report.timeline`).

`failure_section` is shown for every run whose trial did not pass: each checker that did not pass with its
evidence lines, the replay command (from the trial's scenario, schedule and seed and the run's meta.json), a
link to the run's timeline, the attempts and effects the fake services journalled (an effect applied more
than once for one key, with no key and the same payload, or with the same payload under another key, is
marked `dup`, says which, and stands out in red), and the last lines of each incarnation's log
(`<inc with # as ->.log` in the run directory).
"""

from __future__ import annotations

import html
import json
from collections import Counter
from pathlib import Path

from killpoint.events import (
    Attempt,
    Effect,
    Event,
    IncStart,
)
from killpoint.faults.schedule import Schedule, ScheduleError
from killpoint.report.text import NO_FAULT
from killpoint.run.scenario import replay_command

LOG_TAIL = 15


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
                          meta.get("previous_steps"), meta.get("worker_cmd"),
                          adapter=meta.get("adapter") if meta.get("worker_cmd") else None,
                          run_timeout=meta.get("run_timeout"), exit_codes=meta.get("exit_codes"),
                          allow_egress=meta.get("allow_egress") or (), skip_checkers=meta.get("skip_checkers") or ())


def duplicates(effects: list[dict]) -> dict[int, str]:
    """Effects applied more than once, by index, each with why: the same service and key (`same key`), or the
    same service and payload with no key or under another key (`same payload, no key` / `..., another key`)."""
    keyed = Counter((e.get("service"), e.get("key")) for e in effects if e.get("key"))
    payloads = [(e.get("service"), json.dumps(e.get("payload"), sort_keys=True)) for e in effects]
    same_payload = Counter(payloads)
    out: dict[int, str] = {}
    for i, e in enumerate(effects):
        if e.get("key") and keyed[(e.get("service"), e.get("key"))] > 1:
            out[i] = "same key"
        elif same_payload[payloads[i]] > 1:
            out[i] = "same payload, " + ("another key" if e.get("key") else "no key")
    return out


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
    out.append(f"<p><a class=to-timeline href='#run-{html.escape(run_id)}'>timeline of {html.escape(run_id)}</a></p>")
    mine = [e for e in events if e.run_id == run_id]
    for kind, cls in (("attempt", Attempt), ("effect", Effect)):
        records = [e.record for e in mine if isinstance(e, cls) and isinstance(e.record, dict)]
        dup = duplicates(records) if cls is Effect else {}
        out.append(f"<h4>{kind}s ({len(records)})</h4><table class=records><tr><th>#</th><th>service</th><th>key</th>"
                   f"<th>{'outcome' if cls is Attempt else 'id'}</th><th>payload</th></tr>")
        for i, r in enumerate(records):
            mark = " class=dup" if i in dup else ""
            third = r.get("outcome") if cls is Attempt else r.get("id")
            out.append(f"<tr{mark}><td>{html.escape(str(r.get('order', i + 1)))}</td><td>{html.escape(str(r.get('service')))}"
                       f"</td><td>{html.escape(str(r.get('key')))}</td><td>{html.escape(str(third))}"
                       f"{f' (duplicate: {dup[i]})' if mark else ''}"
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
