"""The worker's wall clock under a clock fault (reference_agent/clock.py): `KILLPOINT_CLOCK_OFFSET` moves what
agents read, `time.time` and `datetime.now` alike, also where a module imported them by name before the shift;
monotonic clocks stay. Run in a fresh interpreter: the shift is for the life of a process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

PROGRAM = r"""
import json, time
from datetime import UTC, date, datetime
from time import time as bare_time
import datetime as dt
real, mono = time.time(), time.monotonic()
from killpoint.reference_agent import clock
applied = clock.shift_from()
print(json.dumps({
    "applied": applied,
    "time": time.time() - real, "bare_time": bare_time() - real,
    "now_year": datetime.now(UTC).year, "real_year": datetime.fromtimestamp(real, UTC).year,
    "today_year": date.today().year, "utcnow_year": dt.datetime.utcnow().year,
    "gmtime_year": time.gmtime().tm_year, "strftime_year": int(time.strftime("%Y")),
    "monotonic": time.monotonic() - mono,
    "isinstance": isinstance(dt.datetime(2020, 1, 1), datetime) and isinstance(datetime(2020, 1, 1), dt.datetime),
}))
"""


def _run(offset: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "KILLPOINT_CLOCK_OFFSET"}
    if offset is not None:
        env["KILLPOINT_CLOCK_OFFSET"] = offset
    done = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_a_clock_offset_moves_every_wall_clock_an_agent_reads_and_no_monotonic_one() -> None:
    year_and_a_day = 366 * 86400
    got = _run(str(float(year_and_a_day)))
    assert got["applied"] == year_and_a_day
    assert year_and_a_day <= got["time"] < year_and_a_day + 60
    assert year_and_a_day <= got["bare_time"] < year_and_a_day + 60  # `from time import time` before the shift
    after = got["real_year"] + 1
    assert got["now_year"] == got["today_year"] == got["utcnow_year"] == got["gmtime_year"] == after
    assert got["strftime_year"] == after
    assert got["monotonic"] < 60 and got["isinstance"]


def test_without_an_offset_nothing_moves() -> None:
    for offset in (None, "0", "not a number"):
        got = _run(offset)
        assert got["applied"] == 0 and got["time"] < 60 and got["now_year"] == got["real_year"]
