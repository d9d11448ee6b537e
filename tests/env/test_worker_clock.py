"""How a clock fault reaches an incarnation (harness/env/worker_clock.py): the reference runtime's variable
for a step-module worker, libfaketime for a black-box one (with the sleep shim where libfaketime breaks
monotonic sleeps), nothing without a shift."""

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


def test_fork_servers_start_under_the_same_preload_with_no_shift_and_no_cache(monkeypatch: pytest.MonkeyPatch,
                                                                             tmp_path) -> None:  # noqa: ANN001
    """The clock servers' variables: an incarnation's `LD_PRELOAD` under a shift is theirs (so it is forked
    from them), their shift is 0 and libfaketime's cache is off (so each child reads its own `FAKETIME`)."""
    lib = tmp_path / "libfaketime.so.1"
    lib.write_bytes(b"")
    monkeypatch.setenv("KILLPOINT_FAKETIME_LIB", str(lib))
    monkeypatch.setattr(worker_clock, "monotonic_sleep_broken", lambda _lib: False)
    server = worker_clock.fork_server_env("/x/other.so")
    shifted = worker_clock.clock_env(-3600.0, black_box=True, existing_preload="/x/other.so")
    assert server == {**shifted, "FAKETIME": "+0", "FAKETIME_NO_CACHE": "1"}, (server, shifted)
    monkeypatch.setenv("KILLPOINT_FAKETIME_LIB", str(tmp_path / "absent.so"))
    assert worker_clock.fork_server_env() is None


def test_a_libfaketime_that_breaks_monotonic_sleeps_without_a_compiler_is_unsupported(
        monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # noqa: ANN001
    lib = tmp_path / "libfaketime.so.1"
    lib.write_bytes(b"")
    monkeypatch.setenv("KILLPOINT_FAKETIME_LIB", str(lib))
    monkeypatch.setattr(worker_clock, "monotonic_sleep_broken", lambda _lib: True)
    monkeypatch.setattr(worker_clock, "sleep_shim", lambda: None)
    reason = worker_clock.unsupported(black_box=True)
    assert reason is not None and "issue #426" in reason and "C compiler" in reason
    assert worker_clock.clock_env(60.0, black_box=True) == {}  # the fault is missed, never half-applied


SLEEPER = """
import threading, time
before = time.time()
time.sleep(0.05)                      # Python >= 3.11: clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)
threading.Event().wait(0.05)          # a timed wait on the monotonic clock
print(before, time.time())
"""


@pytest.mark.skipif(worker_clock.faketime_library() is None, reason="libfaketime is not installed here")
@pytest.mark.parametrize("offset", [366 * 86400.0, -3600.0])
def test_a_black_box_python_worker_sleeps_and_reads_the_moved_clock(offset: float) -> None:
    """Under a jump either way, a black-box Python worker's sleeps and timed waits still work (they run on the
    monotonic clock, which a real jump leaves alone), and its wall clock reads the jump."""
    import subprocess
    import sys
    import time

    if worker_clock.unsupported(black_box=True) is not None:
        pytest.skip(worker_clock.unsupported(black_box=True) or "")
    env = {"PATH": "/usr/bin:/bin", **worker_clock.clock_env(offset, black_box=True)}
    start = time.time()
    proc = subprocess.run([sys.executable, "-c", SLEEPER], env=env, capture_output=True, text=True)
    end = time.time()
    assert proc.returncode == 0, proc.stderr
    before, after = (float(x) for x in proc.stdout.split())
    assert start + offset - 60 <= before <= after <= end + offset + 60, (start, before, after, end, offset)
    assert after - before >= 0.1  # it slept, and its wall clock ran on through the sleep


@pytest.mark.skipif(worker_clock.faketime_library() is None, reason="libfaketime is not installed here")
def test_the_probe_sees_this_libfaketimes_monotonic_sleep_as_it_is() -> None:
    """Without the shim, an absolute monotonic sleep under the probed library fails exactly when the probe
    says it is broken; with the preload clock_env builds, it never fails."""
    lib = worker_clock.faketime_library()
    assert lib is not None
    assert (worker_clock._sleep_result(lib) != "0") == worker_clock.monotonic_sleep_broken(lib)
    preload = worker_clock.clock_env(86400.0, black_box=True).get("LD_PRELOAD")
    if preload is not None:
        assert worker_clock._sleep_result(preload) == "0"


@pytest.mark.skipif(worker_clock.faketime_library() is None, reason="libfaketime is not installed here")
@pytest.mark.parametrize("how", ["killed", "exited"])
def test_an_exec_d_worker_under_libfaketime_leaves_nothing_in_dev_shm(how: str, tmp_path) -> None:  # noqa: ANN001
    """libfaketime makes a semaphore and a shared memory object named after the worker's pid and removes them
    at a normal exit only: the launcher removes a SIGKILLed worker's once it has ended (a normal exit's are
    gone either way). Waits on the worker's own note (a FIFO) and its end, not on time."""
    import os
    import select
    import signal
    import sys

    from killpoint.env.exec_launcher import ExecLauncher

    ready = tmp_path / "ready"
    os.mkfifo(ready)  # the worker's note, read as it is written: libfaketime's constructor ran long before it
    note = os.open(ready, os.O_RDONLY | os.O_NONBLOCK)
    script = (f"import time; time.time(); open({str(ready)!r}, 'w').write('x')\n"
              + ("time.sleep(60)\n" if how == "killed" else ""))
    launcher = ExecLauncher([sys.executable, "-c", script])
    try:
        env = {**os.environ, **worker_clock.clock_env(3600.0, black_box=True)}
        env.pop(worker_clock.SHARED_VAR, None)
        inc = launcher.spawn("w-1", "run-faketime", "worker", [], env, None)
        pair = worker_clock.leftovers(inc.pid)
        assert select.select([note], [], [], 60)[0] and os.read(note, 1) == b"x"
        if how == "killed":
            assert all(os.path.exists(p) for p in pair), pair  # made, as the module doc says
            inc.send(signal.SIGKILL)
        assert inc.ended.wait(60)
        assert (inc.signal == signal.SIGKILL) == (how == "killed")
        assert [p for p in pair if os.path.exists(p)] == []
    finally:
        os.close(note)
        launcher.close()


@pytest.mark.skipif(worker_clock.faketime_library() is None, reason="libfaketime is not installed here")
def test_the_exec_guard_removes_libfaketime_s_files_of_what_it_kills() -> None:
    """A harness SIGKILLed mid-run cannot remove what libfaketime made for its exec'd workers: the guard
    (`python -m killpoint.env.exec_launcher`), which kills them at its input's end, removes those too."""
    import os
    import subprocess
    import sys
    import time
    import uuid

    import psutil

    from killpoint.env.proctable import TAG_VAR

    tag = uuid.uuid4().hex
    env = {**os.environ, **worker_clock.clock_env(3600.0, black_box=True), TAG_VAR: tag}
    env.pop(worker_clock.SHARED_VAR, None)
    since = time.time()
    worker = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"],
                              env=env, process_group=0, stdout=subprocess.PIPE, text=True)
    try:
        assert worker.stdout is not None
        said = worker.stdout.readline()  # libfaketime's constructor ran before the interpreter started
        pair = worker_clock.leftovers(worker.pid)
        assert said == "ready\n" and all(os.path.exists(p) for p in pair), pair
        guard = subprocess.Popen([sys.executable, "-m", "killpoint.env.exec_launcher"], stdin=subprocess.PIPE,
                                 process_group=0)
        line = f"{worker.pid} {psutil.Process(worker.pid).create_time()!r} {tag} {since!r}\n"
        guard.communicate(line.encode(), timeout=60)
        assert guard.returncode == 0 and worker.wait(timeout=30) == -9
        assert [p for p in pair if os.path.exists(p)] == []
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        worker_clock.remove_leftovers(worker.pid)
