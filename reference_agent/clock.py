"""The worker's wall clock, as the harness's clock faults move it (harness/env/worker_clock.py).

A `clock±N` fault kills a worker and resumes its run with the wall clock moved by N: the resumed worker
finds the shift in ``KILLPOINT_CLOCK_OFFSET`` (seconds; absent or 0 outside such a run) and :func:`shift`
moves what agents read by it, in this process only:

- ``time.time``, ``time.time_ns``, and ``time.localtime``, ``time.gmtime``, ``time.ctime`` and
  ``time.strftime`` called without a time;
- ``datetime.datetime.now``/``utcnow``/``today`` and ``datetime.date.today``: ``datetime.datetime`` and
  ``datetime.date`` become subclasses whose constructors of "now" read the moved clock (``isinstance`` of
  a plain ``datetime`` against them stays true);
- the same names where a module already imported them (``from datetime import datetime``, ``from time
  import time``): every loaded module's global bound to one of the originals is pointed at the moved one.

Monotonic clocks (``time.monotonic``, ``perf_counter``), which timeouts and backoffs read, are left alone,
and so is the database's ``now()`` (leases are judged by it). With no shift, nothing is touched.
"""

from __future__ import annotations

import datetime as _dt
import os
import sys
import time as _time
from collections.abc import Mapping
from typing import Any

OFFSET_VAR = "KILLPOINT_CLOCK_OFFSET"

_REAL = {"time": _time.time, "time_ns": _time.time_ns, "localtime": _time.localtime, "gmtime": _time.gmtime,
         "ctime": _time.ctime, "strftime": _time.strftime}
_REAL_DATETIME = _dt.datetime
_REAL_DATE = _dt.date
_offset = 0.0


def offset() -> float:
    """Seconds this process's wall clock is moved by (0.0: not moved)."""
    return _offset


def _time_now() -> float:
    return _REAL["time"]() + _offset


def _time_ns() -> int:
    return _REAL["time_ns"]() + int(_offset * 1_000_000_000)


def _localtime(secs: float | None = None) -> _time.struct_time:
    return _REAL["localtime"](_time_now() if secs is None else secs)


def _gmtime(secs: float | None = None) -> _time.struct_time:
    return _REAL["gmtime"](_time_now() if secs is None else secs)


def _ctime(secs: float | None = None) -> str:
    return _REAL["ctime"](_time_now() if secs is None else secs)


def _strftime(fmt: str, t: Any = None) -> str:  # noqa: ANN401 - a struct_time or a 9-tuple
    return _REAL["strftime"](fmt, _localtime() if t is None else t)


class _DatetimeMeta(type):
    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, _REAL_DATETIME)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, _REAL_DATETIME)


class _DateMeta(type):
    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, _REAL_DATE)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, _REAL_DATE)


class MovedDatetime(_REAL_DATETIME, metaclass=_DatetimeMeta):
    """``datetime.datetime`` whose "now" reads the moved clock (its values are plain datetimes)."""

    @classmethod
    def now(cls, tz: _dt.tzinfo | None = None) -> _dt.datetime:  # type: ignore[override]
        return _REAL_DATETIME.fromtimestamp(_time_now(), tz)

    @classmethod
    def utcnow(cls) -> _dt.datetime:  # type: ignore[override]
        return _REAL_DATETIME.fromtimestamp(_time_now(), _dt.UTC).replace(tzinfo=None)

    @classmethod
    def today(cls) -> _dt.datetime:  # type: ignore[override]
        return _REAL_DATETIME.fromtimestamp(_time_now())


class MovedDate(_REAL_DATE, metaclass=_DateMeta):
    """``datetime.date`` whose ``today()`` reads the moved clock."""

    @classmethod
    def today(cls) -> _dt.date:  # type: ignore[override]
        return _REAL_DATE.fromtimestamp(_time_now())


_MOVED: dict[int, Any] = {id(_REAL["time"]): _time_now, id(_REAL["time_ns"]): _time_ns,
                          id(_REAL["localtime"]): _localtime, id(_REAL["gmtime"]): _gmtime,
                          id(_REAL["ctime"]): _ctime, id(_REAL["strftime"]): _strftime,
                          id(_REAL_DATETIME): MovedDatetime, id(_REAL_DATE): MovedDate}
"""Each original (by identity) and what replaces it."""


def shift(seconds: float) -> None:
    """Move this process's wall clock by `seconds` from now on (see the module docstring); 0 does nothing."""
    global _offset
    if not seconds:
        return
    _offset = float(seconds)
    for name in _REAL:
        setattr(_time, name, _MOVED[id(_REAL[name])])
    _dt.datetime = MovedDatetime  # type: ignore[misc]
    _dt.date = MovedDate  # type: ignore[misc]
    for module in list(sys.modules.values()):
        if module is None or module is sys.modules[__name__]:
            continue
        try:
            names = [(k, v) for k, v in vars(module).items() if id(v) in _MOVED and _is_original(v)]
        except TypeError:
            continue
        for name, value in names:
            try:
                setattr(module, name, _MOVED[id(value)])
            except (AttributeError, TypeError):
                continue


def _is_original(value: object) -> bool:
    return value is _REAL_DATETIME or value is _REAL_DATE or any(value is f for f in _REAL.values())


def shift_from(environ: Mapping[str, str] = os.environ) -> float:
    """:func:`shift` by ``KILLPOINT_CLOCK_OFFSET`` (a bad value is ignored); the shift applied."""
    try:
        seconds = float(environ.get(OFFSET_VAR, "") or 0)
    except ValueError:
        return 0.0
    shift(seconds)
    return seconds
