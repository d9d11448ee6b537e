"""The error line format and the wait object's timeout message."""

from __future__ import annotations

from pathlib import Path

import pytest

from killpoint.env.postgres.handle import db_name
from killpoint.env.postgres.wait import Wait
from killpoint.errors import EnvironmentProblem, KillpointError, UsageError


def test_error_line_shape() -> None:
    err = EnvironmentProblem("no-postgres", "no Postgres available.", "install postgresql.")
    assert err.line() == "killpoint: error[no-postgres]: no Postgres available. Fix: install postgresql"
    assert isinstance(err, KillpointError) and err.exit_code == 2 and UsageError.exit_code == 2
    assert str(err) == err.line()


def test_wait_returns_first_truthy_result() -> None:
    calls = iter([None, None, 42])
    assert Wait("a number", 5).until(lambda: next(calls)) == 42


def test_wait_timeout_carries_log_tail_and_hint(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("line 1\nFATAL: something broke\n")
    with pytest.raises(EnvironmentProblem) as info:
        Wait("the server", 0.05, log, hint="read the log", code="server-not-ready").until(lambda: None)
    line = info.value.line()
    assert line.startswith("killpoint: error[server-not-ready]: gave up after 0.05s waiting for the server")
    assert "FATAL: something broke" in line and line.endswith("Fix: read the log")


@pytest.mark.parametrize(
    ("raw", "ok"),
    [("plain_name", "plain_name"), ("tests/x.py::test_a[1-2]", None), ("9lives", None), ("x" * 80, None)],
)
def test_db_name_is_valid_and_stable(raw: str, ok: str | None) -> None:
    name = db_name(raw)
    assert name == db_name(raw) and len(name) <= 63 and name.replace("_", "").isalnum()
    assert not name[0].isdigit()
    if ok:
        assert name == ok
