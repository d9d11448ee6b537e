"""Black-box Python workers forked from fork servers that preloaded their libraries (harness/env/pycommand.py,
pymain.py, pyfork_launcher.py): which commands qualify and what is preloaded, found without running the
script; a forked incarnation behaves as the fresh interpreter it replaces (same output, exit code, atexit);
and each case where a fork could not be the same is exec'd instead, with the line that says why: a library
that reads a per-run variable at import (left out of the preload), one whose variable differs in this
incarnation, LD_PRELOAD, a preload that leaves a thread running or a descriptor open. Nothing is left behind."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from killpoint.env import pycommand, stepmodule, worker_clock
from killpoint.env.launcher import HASH_SEEDS
from killpoint.env.pycommand import PythonCommand, auto_preload, parse, preload_option, top_level_imports
from killpoint.env.pyfork_launcher import PythonForkLauncher
from tests.helpers.agents import wait_for
from tests.helpers.python_workers import Workers, workers_fixture  # noqa: F401 (the `workers` fixture)

# ---- which commands qualify, and what is preloaded (no process) ---------------------------------------------


def test_a_script_or_module_on_this_interpreter_qualifies(tmp_path: Path) -> None:
    script = tmp_path / "w.py"
    script.write_text("")
    assert parse([sys.executable, str(script), "{run_id}", "--keyed"]) == \
        PythonCommand(script=str(script), module=None, args=("{run_id}", "--keyed"))
    assert parse([sys.executable, "-m", "pkg.worker", "{run_id}"]) == \
        PythonCommand(script=None, module="pkg.worker", args=("{run_id}",))
    cmd = parse([sys.executable, str(script), "a-{run_id}"])
    assert isinstance(cmd, PythonCommand) and cmd.argv("r7") == ["a-r7"] and cmd.folder == str(tmp_path.resolve())


@pytest.mark.parametrize(("argv", "why"), [
    (["node", "worker.js", "{run_id}"], "not a Python interpreter"),
    (["python9.99", "w.py"], "not the interpreter killpoint runs on"),
    ([sys.executable, "-X", "dev", "w.py"], "option -X is not reproduced"),
    ([sys.executable, "missing.py"], "is not a file"),
    ([sys.executable, "{run_id}.py"], "names {run_id}"),
    ([sys.executable], "runs no script"),
])
def test_other_commands_are_exec_d_with_the_reason(argv: list[str], why: str) -> None:
    found = parse(argv)
    assert isinstance(found, str) and why in found, found


def test_the_preload_is_the_libraries_imported_at_top_level(tmp_path: Path) -> None:
    (tmp_path / "helper.py").write_text("")  # the worker's own module: imported afresh by each incarnation
    script = tmp_path / "w.py"
    script.write_text(textwrap.dedent("""\
        from __future__ import annotations
        import json, email.mime.text
        from collections import abc
        from . import sibling
        import helper
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            import decimal
        try:
            import tomllib
        except ImportError:
            import fractions
        def main():
            import statistics
        class C:
            import wave
        """))
    assert top_level_imports(script.read_text()) == ["json", "email.mime.text", "collections", "helper", "typing",
                                                     "tomllib", "fractions"]
    cmd = parse([sys.executable, str(script)])
    assert isinstance(cmd, PythonCommand)
    assert auto_preload(cmd) == ["json", "email.mime.text", "collections", "typing", "tomllib", "fractions"]


def test_preload_option() -> None:
    assert preload_option(None) is None
    assert preload_option("none") == () and preload_option(" NONE ") == ()
    assert preload_option("a.b, c,a.b") == ("a.b", "c")


# ---- forked incarnations, and the cases that are exec'd ----------------------------------------------------

def test_a_forked_incarnation_behaves_as_a_fresh_interpreter(tmp_path: Path, workers: list[Workers]) -> None:
    """Same `__main__`, argv, sys.path[0], `__file__`, environment, exit code and atexit output as the exec'd
    command, and annotations evaluated as `python` compiles the script (not postponed by pymain's own
    `from __future__ import annotations`), and `/proc/self/cmdline` the worker's command, not the fork
    server's (harness/env/proctitle.py); the n-th incarnation of a run gets the n-th hash seed either way;
    nothing left running."""
    w = Workers(tmp_path, {"mylib": "VALUE = 41 + 1\n"}, uses="mylib.VALUE")
    workers.append(w)
    assert w.launcher.forking and any("preloaded" in s and "mylib" in s for s in w.said), w.said
    forked = w.run(INC_VAR="one")
    exec_d = w.run(INC_VAR="one", LD_PRELOAD="")  # LD_PRELOAD differs from the servers': exec'd
    assert forked[3] and not exec_d[3]
    assert any("LD_PRELOAD differs" in s for s in w.said), w.said
    assert (forked[0].pop("hashseed"), exec_d[0].pop("hashseed")) == (str(HASH_SEEDS[0]), str(HASH_SEEDS[1]))
    assert (forked[0], forked[2]) == (exec_d[0], exec_d[2])
    assert forked[1].splitlines()[1:] == exec_d[1].splitlines()[1:]
    report, text, code, _ = forked
    assert report == {"annotations": "evaluated", "cmdline": [sys.executable, str(w.script), "run-1", "x"],
                      "name": "__main__", "argv": [str(w.script), "run-1", "x"], "path0": str(w.script.parent),
                      "file": str(w.script), "main": True, "var": "one", "lib": 42}
    assert code == 3 and text.rstrip().endswith("atexit ran")


def test_a_file_the_worker_left_open_is_flushed_at_its_end_as_by_a_fresh_interpreter(
        tmp_path: Path, workers: list[Workers]) -> None:
    """A file opened for writing, kept in a global, written and never closed: a fresh interpreter flushes it
    when it finalizes at exit; a forked incarnation, which ends with `os._exit`, flushes it too
    (harness/env/open_files.py), and so does an exec'd one (the same `pymain` end behind the egress guard)."""
    w = Workers(tmp_path, {"mylib": "VALUE = 41 + 1\n"}, uses="mylib.VALUE")
    workers.append(w)
    journal = tmp_path / "journal.txt"
    forked = w.run(JOURNAL=str(journal))
    exec_d = w.run(JOURNAL=str(journal), LD_PRELOAD="")
    assert (forked[2], forked[3], exec_d[2], exec_d[3]) == (3, True, 3, False)
    assert journal.read_text().splitlines() == [f"{inc.pid} ran" for inc in w.incs], journal.read_text()



UNFLUSHED = {
    # opened for writing, written, never closed: flushed by a fresh interpreter's end, lost by `os._exit`
    "cstdio": "import ctypes, os\n_libc = ctypes.CDLL(None)\n_libc.fopen.restype = ctypes.c_void_p\n"
              "_libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]\n"
              "_libc.fputs.argtypes = [ctypes.c_char_p, ctypes.c_void_p]\n"
              "def write(path):\n    f = _libc.fopen(path.encode(), b'a')\n"
              "    _libc.fputs(f'{os.getpid()} c\\n'.encode(), f)\n",
    "rawio": "import _io, os\nKEPT = []\ndef write(path):\n    f = _io.open(path, 'a')\n"
             "    f.write(f'{os.getpid()} io\\n')\n    KEPT.append(f)\n",
}


def test_a_c_librarys_file_and_one_opened_through_io_are_flushed_at_the_end_as_by_a_fresh_interpreter(
        tmp_path: Path, workers: list[Workers]) -> None:
    """The other two ways a worker leaves a written file unflushed: a C library's `FILE *` (the C runtime
    flushes it at `exit`) and a file opened through `_io.open` (as `tempfile` opens), each written and never
    closed. `python worker.py` itself (no harness) flushes both at its end; so do a forked incarnation and an
    exec'd one, which end with `os._exit` (`open_files.flush`)."""
    w = Workers(tmp_path, UNFLUSHED, uses="[cstdio.write(os.environ['OUT_C']), rawio.write(os.environ['OUT_IO'])]")
    workers.append(w)
    out = {"OUT_C": str(tmp_path / "c.txt"), "OUT_IO": str(tmp_path / "io.txt")}
    plain = subprocess.Popen([sys.executable, str(w.script), "run-0", "x"], env={**w.env, **out},
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert plain.wait(timeout=60) == 3
    forked = w.run(**out)
    exec_d = w.run(**out, LD_PRELOAD="")
    assert (forked[2], forked[3], exec_d[2], exec_d[3]) == (3, True, 3, False)
    pids = [plain.pid, *(inc.pid for inc in w.incs)]
    assert (tmp_path / "c.txt").read_text().splitlines() == [f"{pid} c" for pid in pids]
    assert (tmp_path / "io.txt").read_text().splitlines() == [f"{pid} io" for pid in pids]

def test_a_script_edited_between_incarnations_runs_as_edited(tmp_path: Path, workers: list[Workers]) -> None:
    """The server compiles the script once, before its first fork (pymain.script_code); an incarnation
    started after the file changed runs the file as it is now, forked all the same."""
    w = Workers(tmp_path, {"mylib": "VALUE = 41 + 1\n"}, uses="mylib.VALUE")
    workers.append(w)
    first = w.run()
    w.script.write_text(w.script.read_text().replace("mylib.VALUE", "mylib.VALUE + 1"))
    second = w.run()
    assert (first[0]["lib"], first[3], second[0]["lib"], second[3]) == (42, True, 43, True)


def test_a_library_that_keeps_a_per_run_variable_read_at_import_in_its_globals_is_preloaded_with_each_value(
        tmp_path: Path, workers: list[Workers]) -> None:
    """`capture` keeps RUN_URL, read at import, in a global (as the resend SDK keeps RESEND_API_URL in
    `resend.api_url`); `_captwo`, which it imports, reads it again with `os.getenv`; `_copy` takes capture's
    with `from capture import URL`; `_flag` only asks whether it is set. All are preloaded (their PID is the
    server's) and every forked incarnation finds its own value in each global; one without RUN_URL is exec'd,
    as a fresh interpreter would make `_flag.ON` false."""
    w = Workers(tmp_path, {"steady": "X = 1\n", "_captwo": "import os\nPID = os.getpid()\nURL = os.getenv('RUN_URL')\n",
                           "_copy": "from capture import URL\n", "_flag": "import os\nON = 'RUN_URL' in os.environ\n",
                           "capture": "import os\nURL = os.environ.get('RUN_URL', 'https://api')\nimport _captwo\n"
                                      "import _copy, _flag\n"},
                uses="[capture.URL, capture._captwo.URL, capture._copy.URL, capture._flag.ON, "
                     "capture._captwo.PID == os.getppid()]", volatile=("RUN_URL",))
    workers.append(w)
    said = "\n".join(w.said)
    assert "steady, capture; RUN_URL, read at import, is each incarnation's own in _captwo.URL, _copy.URL, " \
           "capture.URL" in said, said
    assert "not preloaded" not in said, said
    for url in ("http://a/runs/1", "http://a/runs/2", "http://a/runs/3"):
        report, _, code, forked = w.run(RUN_URL=url)
        assert forked and code == 3 and report["lib"] == [url, url, url, True, True], report
    report, _, code, forked = w.run()
    assert not forked and code == 3 and report["lib"] == ["https://api", None, "https://api", False, False], report
    assert any("incarnations without RUN_URL are exec'd" in s for s in w.said), w.said


def test_a_library_that_makes_something_of_a_per_run_variable_at_import_is_not_preloaded(
        tmp_path: Path, workers: list[Workers]) -> None:
    """What a library makes at import of a per-run variable cannot be bound per incarnation: `joined` extends
    RUN_URL, `parsed` keeps only its host, `branch` tests its scheme, `boxed` keeps it in a dict, `classy` in a
    class, `matched` its scheme as a regular expression (C code, no method called) found it. Each is left out (the servers start again without it), said with its reason, and each incarnation
    imports it under its own value; `capture` keeps the variable itself and is preloaded. `_dep` and `_after`,
    which `joined` imports before and after it reads RUN_URL, are preloaded in its place (their PID is the
    server's: as resend's `requests` and `httpx` were); `_again`, which it imports last and which reads
    RUN_URL itself, is not."""
    bad = {
        "joined": "import os, _dep\nURL = os.environ['RUN_URL'] + '/v1'\nimport _after, _again\n",
        "parsed": "import os, urllib.parse\nURL = urllib.parse.urlsplit(os.environ['RUN_URL']).netloc\n",
        "branch": "import os\nURL = 'tls' if os.environ.get('RUN_URL', '').startswith('https') else 'plain'\n",
        "boxed": "import os\nCONFIG = {'url': os.environ.get('RUN_URL')}\nURL = CONFIG['url']\n",
        "classy": "import os\nclass Settings:\n    url = os.environ.get('RUN_URL')\nURL = Settings.url\n",
        "matched": "import os, re\nURL = re.match('[^:]*', os.environ['RUN_URL']).group(0)\n",
    }
    w = Workers(tmp_path, {"capture": "import os\nURL = os.environ.get('RUN_URL')\n", **bad,
                           "_dep": "import os\nPID = os.getpid()\n", "_after": "import os\nPID = os.getpid()\n",
                           "_again": "import os\nPID = os.getpid()\nURL = os.environ.get('RUN_URL')\n"},
                uses="[m.URL for m in (capture, joined, parsed, branch, boxed, classy, matched)] + "
                     "[joined._dep.PID == os.getppid(), joined._after.PID == os.getppid(), "
                     "joined._again.PID == os.getpid(), capture.__name__ in __import__('sys').modules]",
                volatile=("RUN_URL",))
    workers.append(w)
    said = "\n".join(w.said)
    assert "os, sys, capture;" in said, said
    assert "joined not preloaded: its import looked at the value of RUN_URL, which differs per run (2 modules of " \
           "other packages it imported are preloaded)" in said, said
    assert "parsed not preloaded: its import looked at the value of RUN_URL" in said, said
    assert "branch not preloaded: its import looked at the value of RUN_URL" in said, said
    assert "boxed not preloaded: its import kept the value of RUN_URL elsewhere than in a module's globals" in said
    assert "classy not preloaded: its import kept the value of RUN_URL elsewhere than in a module's globals" in said
    assert "matched not preloaded: its import passed on the value of RUN_URL and kept it in no module's globals" in said
    for url, host, branch in (("http://a/runs/1", "a", "plain"), ("https://b/runs/2", "b", "tls")):
        scheme = url.partition(":")[0]
        report, _, code, forked = w.run(RUN_URL=url)
        assert forked and code == 3, report
        assert report["lib"] == [url, url + "/v1", host, branch, url, url, scheme, True, True, True, True], report


def test_an_incarnation_whose_variable_read_at_import_differs_is_exec_d(tmp_path: Path,
                                                                        workers: list[Workers]) -> None:
    w = Workers(tmp_path, {"mode": "import os\nMODE = os.environ.get('LIB_MODE', 'plain')\n"}, uses="mode.MODE")
    workers.append(w)
    report, _, _, forked = w.run()
    assert forked and report["lib"] == "plain"
    report, _, _, forked = w.run(LIB_MODE="strict")
    assert not forked and report["lib"] == "strict"
    assert any("LIB_MODE differs are exec'd (a preloaded module read it at import)" in s for s in w.said), w.said



def test_a_library_reading_stdin_at_import_is_preloaded_and_reads_its_end(tmp_path: Path,
                                                                         workers: list[Workers]) -> None:
    """The server's stdin while it preloads is /dev/null, as every incarnation's is (its command pipe is
    elsewhere): a library that reads stdin at import gets the end of input there, as `python worker.py
    </dev/null` would, instead of waiting on the harness's commands (the preload's time limit), and a
    restart of the preload (the per-run variable's library below) still finds its commands."""
    w = Workers(tmp_path, {"piped": "import sys\nPIPED = sys.stdin.read()\n",
                           "parsed": "import os, urllib.parse\nURL = urllib.parse.urlsplit(os.environ['RUN_URL']).netloc\n"},
                uses="[piped.PIPED, parsed.URL]", volatile=("RUN_URL",))
    workers.append(w)
    assert any("parsed not preloaded" in s for s in w.said), w.said
    report, _, code, forked = w.run(RUN_URL="http://a/runs/1")
    assert forked and code == 3, report
    assert report["lib"] == ["", "a"], report



UNTIL_UP = "import os, sys, time\n{before}\nwhile not os.path.exists({flag!r}):\n    time.sleep(0.05)\nREADY = True\n"
NEVER_READY = {
    # name: (what the library does at import before it waits for the flag, words of the `worker-cmd:` line)
    "waits": ("", "did not finish importing the worker's libraries within 4 s"),
    "closes-the-servers-pipe": ("os.closerange(3, 4096)", "did not finish importing the worker's libraries within 4 s"),
    "writes-on-the-servers-pipe": ("[os.write(int(a.partition('=')[2]), b'up\\n') for a in sys.argv "
                                   "if a.startswith('--protocol-fd=')]", "wrote b'up\\n' on its pipe to the harness"),
}


@pytest.mark.parametrize("how", list(NEVER_READY))
def test_a_preload_that_never_says_ready_is_given_up_and_every_incarnation_exec_d(
        tmp_path: Path, workers: list[Workers], monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """A library whose import waits on something that does not come (here a file) keeps its fork servers
    from ever being ready, whether it waits with the servers' pipe open, closed, or written on: they are
    killed (after the import limit, or at once for what is not their protocol) and every incarnation is
    exec'd, with the line that says why, instead of the session waiting without end before its first trial.
    Once what it waits for is there, the exec'd incarnation imports it and runs."""
    flag = tmp_path / "service-up"
    before, words = NEVER_READY[how]
    monkeypatch.setenv("KILLPOINT_IMPORT_TIMEOUT", "1")
    monkeypatch.setattr(stepmodule, "STARTUP_SECONDS", 3.0)  # the interpreter's own start: 4 s in all, not 11
    w = Workers(tmp_path, {"waits": UNTIL_UP.format(before=before, flag=str(flag))}, uses="waits.READY")
    workers.append(w)
    said = "\n".join(w.said)
    assert "every incarnation exec'd: the fork server" in said and words in said, said
    assert w.server_pids() == []
    flag.write_text("")
    report, _, code, forked = w.run()
    assert not forked and code == 3 and report["lib"] is True, report


CLOCKS = ("[__import__('time').time(), __import__('datetime').datetime.now().timestamp(), "
          "__import__('time').time_ns() / 1e9, __import__('time').monotonic(), os.getppid()]")
"""What the worker reports as its `lib`: its wall clock read three ways (`datetime.now` in C), its monotonic
clock, its parent."""


@pytest.mark.skipif(worker_clock.unsupported(black_box=True) is not None,
                    reason="libfaketime cannot move a clock here")
def test_an_incarnation_under_a_clock_shift_is_forked_with_its_own_wall_clock(tmp_path: Path,
                                                                             workers: list[Workers]) -> None:
    """A clock fault's shift (the environment `clock_env` gives an exec'd incarnation) is forked from the
    clock servers under libfaketime: an hour ahead, its wall clock (`time.time`, `datetime.now`,
    `time.time_ns`) is an hour ahead and its monotonic clock the machine's; a sibling without a shift, forked
    from the other servers, and one an hour behind, each read their own; nothing is exec'd."""
    w = Workers(tmp_path, {"mylib": "X = 1\n"}, uses=CLOCKS)
    workers.append(w)
    wall, mono = time.time(), time.monotonic()
    found = [(offset, w.run(**worker_clock.clock_env(offset, black_box=True))) for offset in (3600.0, 0.0, -3600.0)]
    wall_end, mono_end = time.time(), time.monotonic()
    clock_servers = w.server_pids(clock=True)
    assert len(clock_servers) == len(HASH_SEEDS) and not set(clock_servers) & set(w.server_pids(clock=False))
    for offset, (report, _, code, forked) in found:
        *walls, monotonic, parent = report["lib"]
        assert forked and code == 3 and (parent in clock_servers) == bool(offset), (offset, report)
        assert all(wall - 0.001 <= t - offset <= wall_end + 0.001 for t in walls), (offset, wall, walls, wall_end)
        assert mono <= monotonic <= mono_end, (offset, mono, monotonic, mono_end)
    assert any("shift forked from servers under libfaketime" in s for s in w.said), w.said
    assert not any("exec'd" in s for s in w.said), w.said


CHILD = ("(lambda p: [p.stdout.readline() and p.pid, os.environ.get('FAKETIME_SHARED')])(__import__('subprocess')"
         ".Popen([sys.executable, '-c', 'print(1, flush=True); import time; time.sleep(600)'], stdout=-1))")
"""What the worker reports as its `lib`: the pid of a program it started (under its preload; started: it has
printed a line) and left running, and the `FAKETIME_SHARED` it was given."""


@pytest.mark.skipif(worker_clock.unsupported(black_box=True) is not None,
                    reason="libfaketime cannot move a clock here")
def test_a_program_a_shifted_forked_incarnation_starts_and_is_killed_leaves_nothing_in_dev_shm(
        tmp_path: Path, workers: list[Workers]) -> None:
    """An incarnation forked from a clock server is given the server's `FAKETIME_SHARED`: a program it starts
    under the inherited preload uses the server's pair, which the launcher removes, and makes none of its own,
    which it could not remove once SIGKILLed with its incarnation (before: it left two files in /dev/shm)."""
    w = Workers(tmp_path, {"mylib": "X = 1\n"}, uses=CHILD)
    workers.append(w)
    report, _, code, forked = w.run(**worker_clock.clock_env(3600.0, black_box=True))
    child, shared = report["lib"]
    program = psutil.Process(child)
    program.kill()
    program.wait(timeout=30)
    left = [path for path in worker_clock.leftovers(child) if os.path.exists(path)]
    for path in left:  # a failure leaves nothing behind either
        os.unlink(path)
    assert forked and code == 3 and not left and shared, (report, left)


@pytest.mark.skipif(worker_clock.unsupported(black_box=True) is not None,
                    reason="libfaketime cannot move a clock here")
def test_the_clock_servers_outlive_the_thread_whose_spawn_started_them(tmp_path: Path,
                                                                       workers: list[Workers]) -> None:
    """A run's thread asks for the first shifted incarnation and ends (a trial does): the clock servers it
    caused to start are still there for the next one (their parent-death signal is not that thread's)."""
    import threading

    w = Workers(tmp_path, {"mylib": "X = 1\n"}, uses="os.getppid()")
    workers.append(w)
    shift = worker_clock.clock_env(60.0, black_box=True)
    first: list = []
    thread = threading.Thread(target=lambda: first.append(w.run(**shift)))
    thread.start()
    thread.join()
    second = w.run(**shift)
    clock_servers = w.server_pids(clock=True)
    for report, _, code, forked in (first[0], second):
        assert forked and code == 3 and report["lib"] in clock_servers, (report, clock_servers)
    assert w.launcher.died() is None, w.launcher.died()
    assert all(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in clock_servers)


def test_without_libfaketime_an_incarnation_under_a_shift_is_exec_d_and_says_why(
        tmp_path: Path, workers: list[Workers], monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the clock servers cannot run under libfaketime, a shifted incarnation is exec'd (with the
    environment it was given) and the others are still forked."""
    w = Workers(tmp_path, {"mylib": "X = 1\n"}, uses="os.environ.get('FAKETIME')")
    workers.append(w)
    monkeypatch.setattr(worker_clock, "fork_server_env", lambda _existing=None: None)
    shifted = w.run(FAKETIME="+60", LD_PRELOAD="")  # what clock_env gives, without the library itself
    plain = w.run()
    assert (shifted[0]["lib"], shifted[3]) == ("+60", False) and (plain[0]["lib"], plain[3]) == (None, True)
    assert any("shift are exec'd: libfaketime cannot move a clock here" in s for s in w.said), w.said


@pytest.mark.parametrize(("source", "why"), [
    ("import threading, time\nthreading.Thread(target=time.sleep, args=(3600,), daemon=True).start()\n",
     "left 1 thread(s) running"),
    ("import os\nLOG = open(os.devnull, 'w')\n", "left 1 descriptor(s) open"),
])
def test_a_preload_that_leaves_a_thread_or_descriptor_turns_forking_off(tmp_path: Path, workers: list[Workers],
                                                                        source: str, why: str) -> None:
    w = Workers(tmp_path, {"busy": source}, uses="1")
    workers.append(w)
    assert not w.launcher.forking
    assert any(f"every incarnation exec'd: importing busy {why}" in s for s in w.said), w.said
    report, _, code, forked = w.run()
    assert not forked and code == 3 and report["lib"] == 1


def test_module_file_finds_a_package_module_without_importing_it(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (pkg / "worker.py").write_text("import json\n")
    assert pycommand.module_file("pkg.worker", str(tmp_path)) == str(pkg / "worker.py")
    assert pycommand.module_file("pkg.nothing", str(tmp_path)) is None


def test_the_worker_preload_option_needs_a_worker_and_module_names() -> None:
    from killpoint.cli.config import worker_preload_option
    from killpoint.errors import UsageError

    assert worker_preload_option(None, None) is None
    assert worker_preload_option("none", "python w.py {run_id}") == ()
    assert worker_preload_option("langgraph.graph,psycopg", "python w.py {run_id}") == ("langgraph.graph", "psycopg")
    for text, worker, code in (("psycopg", None, "preload-without-worker"), ("a b", "python w.py", "bad-worker-preload"),
                               (",", "python w.py", "bad-worker-preload")):
        with pytest.raises(UsageError) as caught:
            worker_preload_option(text, worker)
        assert caught.value.code == code


def test_a_module_run_with_dash_m_is_forked_as_python_dash_m_runs_it(tmp_path: Path) -> None:
    """`python -m pkg.worker ARGS` from the working directory: `__main__`, argv[0] the module's file,
    sys.path[0] the working directory, as a fresh `python -m` gives (compared with one)."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "worker.py").write_text("import json, sys\ndef f(x: int): ...\n"
                                   "cmd = open('/proc/self/cmdline').read().replace(chr(0), ' ').split()\n"
                                   "print(json.dumps([__name__, sys.argv, sys.path[0], __file__,"
                                   " f.__annotations__['x'] is int, cmd]))\n")
    worker_cmd = f"{shlex.quote(sys.executable)} -m pkg.worker {{run_id}} y"
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        cmd = parse(shlex.split(worker_cmd))
        assert isinstance(cmd, PythonCommand) and auto_preload(cmd) == ["json", "sys"]
        env = {**os.environ, "PYTHONPATH": str(tmp_path)}
        launcher = PythonForkLauncher(cmd, auto_preload(cmd), env, [])
        launcher.ready()
        try:
            assert launcher.forking
            inc = launcher.spawn("w1", "r1", "worker", [], env, str(tmp_path / "w1.log"))
            assert inc.ended.wait(60) and inc.exit_code == 0
        finally:
            launcher.close()
        fresh = subprocess.run([sys.executable, "-m", "pkg.worker", "r1", "y"], capture_output=True, text=True,
                               env=env, check=True)
        assert json.loads((tmp_path / "w1.log").read_text()) == json.loads(fresh.stdout) == \
            ["__main__", [str(pkg / "worker.py"), "r1", "y"], str(tmp_path), str(pkg / "worker.py"), True,
             [sys.executable, "-m", "pkg.worker", "r1", "y"]]
        assert not inc.leftovers()
    finally:
        os.chdir(cwd)


def test_a_sigterm_handler_a_library_sets_at_import_is_the_forked_incarnations_as_the_exec_d_ones(
        tmp_path: Path, workers: list[Workers]) -> None:
    """`graceful` sets a SIGTERM handler at import (printing, then exiting 7): a fresh interpreter importing it
    ends that way on SIGTERM, and so does a forked incarnation (the server kept the handler for its
    children and set its own back); the servers still end with the launcher."""
    ready = tmp_path / "ready"
    w = Workers(tmp_path, {"graceful": "import signal, sys\ndef bye(*_):\n    print('graceful', flush=True)\n"
                                       "    sys.exit(7)\nsignal.signal(signal.SIGTERM, bye)\n"},
                uses="(open(os.environ['READY_FILE'], 'a').close(), __import__('signal').pause())")
    workers.append(w)
    ended = []
    for extra in ({}, {"LD_PRELOAD": ""}):  # forked, then exec'd (LD_PRELOAD differs from the servers')
        ready.unlink(missing_ok=True)
        inc, log = w.spawn(**extra, READY_FILE=str(ready))
        wait_for(ready.exists, 30, "the worker to wait for its signal")
        os.kill(inc.pid, signal.SIGTERM)
        assert inc.ended.wait(30), "the worker did not end"
        ended.append((inc.exit_code, log.read_text().strip()))
    assert ended == [(7, "graceful\natexit ran")] * 2, ended


def test_the_variables_a_library_sets_at_import_are_the_forked_incarnations_as_the_exec_d_ones(
        tmp_path: Path, workers: list[Workers], monkeypatch: pytest.MonkeyPatch) -> None:
    """`setter` sets LIB_SET, removes LIB_GONE (in the session's environment: the servers' and every
    incarnation's) and `setdefault`s LIB_DEFAULT at import: a forked incarnation's environment (exactly the
    incarnation's) gets the same changes, as an exec'd one's import makes them; one whose LIB_DEFAULT is
    already set (read by `setdefault`) is exec'd and keeps its own."""
    monkeypatch.setenv("LIB_GONE", "here")
    w = Workers(tmp_path, {"setter": "import os\nos.environ['LIB_SET'] = 'yes'\ndel os.environ['LIB_GONE']\n"
                                     "os.environ.setdefault('LIB_DEFAULT', 'lib')\n"},
                uses="[os.environ.get(k) for k in ('LIB_SET', 'LIB_GONE', 'LIB_DEFAULT')]")
    workers.append(w)
    forked = w.run()
    exec_d = w.run(LD_PRELOAD="")
    own = w.run(LIB_DEFAULT="mine")
    assert [(r["lib"], was_forked) for r, _, _, was_forked in (forked, exec_d, own)] == [
        (["yes", None, "lib"], True), (["yes", None, "lib"], False), (["yes", None, "mine"], False)]
