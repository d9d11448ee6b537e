"""Outputs and databases that cannot take what killpoint writes, and step modules of hostile shapes (issue 29,
item 9): each is one line and exit 2 naming the fix, never a traceback; a path that cannot work is refused
before the run, not after an hour of trials."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from killpoint.cli.validate import ROOM_BYTES
from tests.helpers.sandbox import Sandbox

REPLAY = ("replay", "--scenario", "crash-points", "--schedule", "plan:step.start:kill", "--quiet")
LONG = "x" * 300

BEFORE: dict[str, tuple[tuple[str, ...], str, str]] = {
    # name: (argv after REPLAY, error code, words of the line)
    "junit-dev-full": (("--junit", "/dev/full"), "path-not-writable", "is not a regular file"),
    "junit-dev-null": (("--junit", "/dev/null"), "path-not-writable", "is not a regular file"),
    "junit-missing-folder": (("--junit", "missing/dir/x.xml"), "path-not-writable", "does not exist"),
    "junit-long-name": (("--junit", f"{LONG}.xml"), "path-not-writable", "longer than a file name may be"),
    "out-long-component": (("--out", f"runs/{LONG}"), "path-not-writable", "longer than a file name may be"),
    "out-long-first-component": (("--out", f"{LONG}/runs"), "path-not-writable", "longer than a file name may be"),
    "junit-a-fifo": (("--junit", "fifo.xml"), "path-not-writable", "is not a regular file"),
}


@pytest.mark.parametrize("name", list(BEFORE))
def test_an_output_that_cannot_be_written_is_refused_before_the_run(sandbox: Sandbox, name: str) -> None:
    extra, code, words = BEFORE[name]
    if name == "junit-a-fifo":
        import os

        os.mkfifo(sandbox.cwd / "fifo.xml")
    out = () if "--out" in extra else ("--out", str(sandbox.out))
    proc = sandbox.run(*REPLAY, *out, *extra)
    _one_line(proc, code, words)
    assert not sandbox.out.exists() or not any(sandbox.out.iterdir())
    assert not (sandbox.cwd / "runs").exists() or not any((sandbox.cwd / "runs").rglob("*.json"))


def _one_line(proc: subprocess.CompletedProcess[str], code: str, words: str) -> None:
    err = proc.stderr.strip()
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], err[-2000:])
    assert "Traceback" not in err, err
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"killpoint: error[{code}]: ") and ". Fix: " in err, err
    assert words in err, err


@contextlib.contextmanager
def tmpfs(size: str) -> Iterator[Path]:
    """A tiny tmpfs (as root), removed after; skips where mount is not allowed."""
    where = Path(f"/tmp/killpoint-tmpfs-{uuid.uuid4().hex[:8]}")
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        where.rmdir()
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
        where.rmdir()


def test_out_on_a_full_file_system_is_refused_before_the_run(sandbox: Sandbox) -> None:
    with tmpfs("256k") as full:
        with contextlib.suppress(OSError):
            (full / "filler").write_bytes(b"\0" * 512 * 1024)
        proc = sandbox.run(*REPLAY, "--out", str(full / "runs"))
        _one_line(proc, "no-room", "too little for a run directory")


def test_out_filling_up_mid_run_is_one_line(sandbox: Sandbox, dsn_args: list[str]) -> None:
    with tmpfs("4m") as small:
        # leave just over the room a start needs (measured here: a one-trial run's directory; at least what
        # the up-front check asks, ROOM_BYTES), so that the
        # histories of the first few trials fill the rest, whatever the size of a history today
        probe = sandbox.run(*REPLAY, "--out", str(small / "probe"), *dsn_args)
        assert probe.returncode == 0, probe.stderr[-2000:]
        start = sum(f.stat().st_blocks * 512 for f in (small / "probe").rglob("*") if f.is_file())
        shutil.rmtree(small / "probe")
        free = shutil.disk_usage(small).free
        with contextlib.suppress(OSError):
            (small / "filler").write_bytes(b"\0" * max(0, free - max(start, ROOM_BYTES) - 96 * 1024))
        proc = sandbox.run("explore", "--scenario", "crash-points", "--random", "400", "--seed", "3", "--no-store",
                           "--quiet", "--out", str(small / "runs"), *dsn_args)
        err = proc.stderr.strip()
        assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], err[-2000:])
        assert "Traceback" not in err, err
        last = err.splitlines()[-1]  # after what a thread of the fork server may have said of its own write
        assert last.startswith("killpoint: error[write-failed]: ") and "No space left on device" in last, err
        assert list((small / "runs").glob("*/history.jsonl")), "what was judged is kept"


HOSTILE_SHAPES: dict[str, str] = {
    "module-getattr-raises": """
        from killpoint.reference_agent.invoice_agent import *  # noqa: F403
        from killpoint.reference_agent import invoice_agent as _a
        STEPS, START, STATE_VERSION = _a.STEPS, _a.START, _a.STATE_VERSION
        def __getattr__(name):
            raise RuntimeError("no attribute for you: " + name)
        """,
    "steps-dict-subclass-raises": """
        from killpoint.reference_agent.invoice_agent import *  # noqa: F403
        from killpoint.reference_agent import invoice_agent as _a
        class Hostile(dict):
            def __iter__(self):
                raise RuntimeError("no iterating")
            def keys(self):
                raise RuntimeError("no keys")
        STEPS = Hostile(_a.STEPS)
        """,
    "steps-a-list": """
        from killpoint.reference_agent.invoice_agent import *  # noqa: F403
        STEPS = [1, 2]
        """,
    "start-unhashable": """
        from killpoint.reference_agent.invoice_agent import *  # noqa: F403
        START = ["plan"]
        """,
    "state-version-a-string": """
        from killpoint.reference_agent.invoice_agent import *  # noqa: F403
        STATE_VERSION = "3"
        """,
}


@pytest.mark.parametrize("name", list(HOSTILE_SHAPES))
def test_a_hostile_step_module_shape_is_one_line(sandbox: Sandbox, name: str) -> None:
    module = "shape_" + name.replace("-", "_")
    (sandbox.cwd / f"{module}.py").write_text(textwrap.dedent(HOSTILE_SHAPES[name]))
    proc = sandbox.run(*REPLAY, "--steps", module, "--out", str(sandbox.out))
    err = proc.stderr.strip()
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], err[-2000:])
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert f"step module {module!r}" in err and ". Fix: " in err, err


def test_two_doctors_on_one_server_both_pass(sandbox: Sandbox, pg_dsn: str) -> None:
    procs = [sandbox.start("doctor", "--dsn", pg_dsn, "--allow-any-dsn") for _ in range(2)]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, (out[-2000:], err[-2000:])
