"""How a clock fault reaches an incarnation (harness/env/worker_clock.py): the reference runtime's variable
for a step-module worker, libfaketime for a black-box one, nothing without a shift."""

from __future__ import annotations

import pytest

from killpoint.env import worker_clock


def test_no_shift_adds_nothing() -> None:
    assert worker_clock.clock_env(0.0, black_box=False) == {} == worker_clock.clock_env(0.0, black_box=True)


def test_a_step_module_worker_reads_the_shift_from_its_runtime_variable() -> None:
    assert worker_clock.clock_env(-3600.0, black_box=False) == {"KILLPOINT_CLOCK_OFFSET": "-3600.0"}
    assert worker_clock.unsupported(black_box=False) is None


def test_a_black_box_worker_runs_under_libfaketime_or_the_fault_says_why_not(monkeypatch: pytest.MonkeyPatch,
                                                                             tmp_path) -> None:  # noqa: ANN001
    lib = tmp_path / "libfaketime.so.1"
    lib.write_bytes(b"")
    monkeypatch.setenv("KILLPOINT_FAKETIME_LIB", str(lib))
    env = worker_clock.clock_env(366 * 86400.0, black_box=True, existing_preload="/x/other.so")
    assert env["LD_PRELOAD"] == f"{lib} /x/other.so" and env["FAKETIME"] == "+31622400"
    assert env["FAKETIME_DONT_FAKE_MONOTONIC"] == "1" and "KILLPOINT_CLOCK_OFFSET" not in env  # not moved twice
    assert worker_clock.unsupported(black_box=True) is None
    monkeypatch.setenv("KILLPOINT_FAKETIME_LIB", str(tmp_path / "absent.so"))
    reason = worker_clock.unsupported(black_box=True)
    assert reason is not None and "apt-get install faketime" in reason
    assert worker_clock.clock_env(60.0, black_box=True) == {}


@pytest.mark.skipif(worker_clock.faketime_library() is None, reason="libfaketime is not installed here")
def test_libfaketime_moves_a_black_box_programs_clock() -> None:
    import subprocess
    import sys

    env = {"PATH": "/usr/bin:/bin", **worker_clock.clock_env(366 * 86400.0, black_box=True)}
    code = "import time; print(time.time())"
    moved = float(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                 check=True).stdout)
    import time

    assert moved - time.time() > 365 * 86400
