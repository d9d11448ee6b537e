"""A black-box fork server's preload grown from what its incarnations imported lazily
(harness/env/preload_learning.py): a submodule of a preloaded package that an incarnation imported is
preloaded once the first incarnation of that server ended, and later incarnations still behave as fresh
interpreters; a module whose import reads a variable the preload did not (or one that differs per run),
starts a thread, or is the worker's own code is never preloaded, and each incarnation imports it itself."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import psutil
import pytest

from killpoint.env import preload_learning
from killpoint.env.preload_learning import LEARN_FROM, Learner
from tests.helpers.agents import wait_for
from tests.helpers.python_workers import Workers, workers_fixture  # noqa: F401 (the `workers` fixture)

LAZY = ("[[name in sys.modules for name in {names}], "
        "[getattr(__import__('importlib').import_module(name), 'VALUE', None) for name in {names}]]")
"""A worker's `lib`: for each module of `names`, whether it was there before the worker imported it (the
server preloaded it), then what it holds."""


def lazy(*names: str) -> str:
    return LAZY.format(names=repr(list(names)))


def test_a_submodule_incarnations_import_lazily_is_preloaded_once_one_of_the_servers_incarnations_ended(
        tmp_path: Path, workers: list[Workers]) -> None:
    """`lazypkg.sub` is imported by the worker's body, never at its top level: the first incarnation of
    each server (the n-th of a run comes from server n % 2) imports it itself; later ones find it preloaded
    and read the same value. The worker's own `helper`, imported the same way, never is."""
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "helper.py").write_text("VALUE = 'own'\n")
    w = Workers(tmp_path, {"lazypkg": "", "lazypkg.sub": "VALUE = 7\n"}, uses=lazy("lazypkg.sub", "helper"))
    workers.append(w)
    runs = [w.run() for _ in range(4)]
    assert all(forked and code == 3 for _, _, code, forked in runs), runs
    assert [report["lib"] for report, _, _, _ in runs] == [
        [[False, False], [7, "own"]], [[False, False], [7, "own"]],
        [[True, False], [7, "own"]], [[True, False], [7, "own"]]]
    assert any("also preloaded, as incarnations imported them: lazypkg.sub" in s for s in w.said), w.said


def test_a_module_beside_the_script_is_the_workers_own_even_inside_a_preloaded_package(
        tmp_path: Path, workers: list[Workers]) -> None:
    """The script is in `lib/lazypkg`, beside `lazypkg.sibling`, and imports `lazypkg` (found on PYTHONPATH, so
    preloaded) and `otherpkg`: `lazypkg.sibling`, imported lazily, is the worker's own code and never
    preloaded; `otherpkg.sub` is."""
    w = Workers(tmp_path, {"lazypkg": "", "lazypkg.sibling": "VALUE = 'sib'\n", "otherpkg": "",
                           "otherpkg.sub": "VALUE = 7\n"},
                uses=lazy("lazypkg.sibling", "otherpkg.sub"), script_in="lib/lazypkg")
    workers.append(w)
    assert any("preloaded" in s and "lazypkg, otherpkg" in s for s in w.said), w.said
    seen = [w.run()[0]["lib"] for _ in range(4)]
    assert seen == [[[False, False], ["sib", 7]]] * 2 + [[[False, True], ["sib", 7]]] * 2, seen


def test_a_lazy_module_reading_a_variable_or_leaving_a_thread_is_refused_and_each_incarnation_imports_it(
        tmp_path: Path, workers: list[Workers]) -> None:
    """Imported lazily, in this order: `lazypkg.mode` reads LAZY_MODE (which the preload did not), `lazypkg.url`
    RUN_URL (per run), `lazypkg.busy` leaves a thread running, `lazypkg.level` LIB_LEVEL (which the preload read
    too: the launcher forks only incarnations that agree with the server on it), `lazypkg.sub` nothing. The
    first three are refused, each with its reason, and every incarnation sees its own LAZY_MODE and RUN_URL;
    the last two are preloaded, and an incarnation whose LIB_LEVEL differs is exec'd and sees its own."""
    names = ("lazypkg.mode", "lazypkg.url", "lazypkg.busy", "lazypkg.level", "lazypkg.sub")
    w = Workers(tmp_path, {
        "lazypkg": "import os\nLEVEL = os.environ.get('LIB_LEVEL', 'low')\n",
        "lazypkg.mode": "import os\nVALUE = os.environ.get('LAZY_MODE')\n",
        "lazypkg.url": "import os\nVALUE = os.environ.get('RUN_URL')\n",
        "lazypkg.busy": "import threading\nthreading.Thread(target=threading.Event().wait, daemon=True).start()\n"
                        "VALUE = 'busy'\n",
        "lazypkg.level": "import os\nVALUE = os.environ.get('LIB_LEVEL', 'low')\n",
        "lazypkg.sub": "VALUE = 7\n",
    }, uses=lazy(*names), volatile=("RUN_URL",))
    workers.append(w)
    seen = []
    for n in range(4):
        report, _, code, forked = w.run(LAZY_MODE=f"mode-{n}", RUN_URL=f"http://fake/runs/{n}")
        assert forked and code == 3, report
        seen.append(report["lib"])
    assert [s[1] for s in seen] == [[f"mode-{n}", f"http://fake/runs/{n}", "busy", "low", 7] for n in range(4)]
    assert [s[0] for s in seen[2:]] == [[False, False, False, True, True]] * 2, seen
    said = "\n".join(w.said)
    assert "lazypkg.mode not preloaded: it reads LAZY_MODE at import, which the preload did not" in said, said
    assert "lazypkg.url not preloaded: it reads RUN_URL at import" in said, said
    assert "lazypkg.busy not preloaded: its import left a thread running" in said, said
    assert "also preloaded, as incarnations imported them: lazypkg.level, lazypkg.sub" in said, said
    report, _, _, forked = w.run(LAZY_MODE="m", RUN_URL="http://fake/runs/9", LIB_LEVEL="high")
    assert not forked and report["lib"][1][3] == "high", report


def test_a_lazy_module_using_a_per_run_value_a_preloaded_module_kept_is_refused(
        tmp_path: Path, workers: list[Workers]) -> None:
    """`capture` is preloaded with RUN_URL bound per incarnation (harness/env/stand_ins.py). Imported lazily:
    `lazypkg.derived` extends `capture.URL`, `lazypkg.copied` takes it with `from capture import URL`; a child
    rebinds only the globals judged at the preload, so both are refused, and every incarnation sees its own
    value in each; `lazypkg.sub` is preloaded."""
    names = ("lazypkg.derived", "lazypkg.copied", "lazypkg.sub")
    w = Workers(tmp_path, {"capture": "import os\nURL = os.environ.get('RUN_URL')\n", "lazypkg": "",
                           "lazypkg.derived": "import capture\nVALUE = capture.URL + '/x'\n",
                           "lazypkg.copied": "from capture import URL as VALUE\n", "lazypkg.sub": "VALUE = 7\n"},
                uses=lazy(*names), volatile=("RUN_URL",))
    workers.append(w)
    seen = []
    for n in range(4):
        report, _, code, forked = w.run(RUN_URL=f"http://fake/runs/{n}")
        assert forked and code == 3, report
        seen.append(report["lib"])
    assert [s[1] for s in seen] == [[f"http://fake/runs/{n}/x", f"http://fake/runs/{n}", 7] for n in range(4)], seen
    assert [s[0] for s in seen[2:]] == [[False, False, True]] * 2, seen
    said = "\n".join(w.said)
    assert "lazypkg.derived not preloaded: its import used the value of RUN_URL, which differs per run" in said, said
    assert ("lazypkg.copied not preloaded: its import kept the value of RUN_URL, which differs per run, where no "
            "child binds its own") in said, said


def test_a_server_learns_from_its_first_incarnations_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In this process, reports written as children write them: a candidate is a module of the standard
    library or of a package already imported, never the worker's own code nor `__main__`; after
    `LEARN_FROM` children reported, children are no longer asked, and a later report teaches nothing."""
    (tmp_path / "ownpkg").mkdir()
    (tmp_path / "ownpkg" / "__init__.py").write_text("")
    monkeypatch.setitem(sys.modules, "ownpkg", type(sys)("ownpkg"))  # as if preloaded by name
    learner = Learner({"folder": str(tmp_path)}, {})
    try:
        stdlib = next(n for n in sorted(sys.stdlib_module_names) if n not in sys.modules and "_" not in n)
        assert learner.candidates(["__main__", "ownpkg.sub", "notimported.sub", "json", "pytest.unheard_of",
                                   stdlib, "xml.unheard_of"]) == ["pytest.unheard_of", stdlib, "xml.unheard_of"]
        learner.arm()
        assert preload_learning._armed is not None and preload_learning._armed[0] == learner.wfd
        for pid in range(LEARN_FROM - 1):
            os.write(learner.wfd, f"#{pid}\n".encode())
        assert learner.feed() is None and preload_learning._armed is not None  # nothing new to learn
        os.write(learner.wfd, b"#last\nmissing_top.sub\n")
        assert learner.feed() is None and preload_learning._armed is None  # the last report: disarmed
        learner.arm()
        assert preload_learning._armed is None
        os.write(learner.wfd, b"#later\ncolorsys\n")
        assert learner.feed() is None  # drained, not learned from
    finally:
        preload_learning._armed = None
        os.close(learner.rfd)
        os.close(learner.wfd)


def test_a_lazy_module_changing_a_signal_handler_or_the_environment_is_refused(
        tmp_path: Path, workers: list[Workers]) -> None:
    """`lazypkg.sig` sets SIGUSR1's handler at import (in the server it would replace the server's own),
    `lazypkg.env` sets a variable (lost in a child, whose environment is the incarnation's): both refused,
    each incarnation still sees what its own import did; `lazypkg.sub` is taken."""
    names = ("lazypkg.sig", "lazypkg.env", "lazypkg.sub")
    w = Workers(tmp_path, {
        "lazypkg": "",
        "lazypkg.sig": "import signal\nsignal.signal(signal.SIGUSR1, lambda *_: None)\nVALUE = 'sig'\n",
        "lazypkg.env": "import os\nos.environ['LAZY_SET'] = 'set'\nVALUE = 'env'\n",
        "lazypkg.sub": "VALUE = 7\n",
    }, uses=lazy(*names) + " + [os.environ.get('LAZY_SET'), callable(__import__('signal').getsignal(10))]")
    workers.append(w)
    seen = [w.run()[0]["lib"] for _ in range(4)]
    assert seen[2:] == [[[False, False, True], ["sig", "env", 7], "set", True]] * 2, seen
    said = "\n".join(w.said)
    assert "lazypkg.sig not preloaded: its import changed a signal's handler" in said, said
    assert "lazypkg.env not preloaded: its import changed the environment" in said, said


def test_a_probe_under_way_is_the_servers_own_not_an_escaped_process(
        tmp_path: Path, workers: list[Workers], monkeypatch: pytest.MonkeyPatch) -> None:
    """A probe is a child of its fork server, as an escaped worker process adopted by it would be: while one is
    importing (held at a FIFO only the servers' environment names), the launcher's count of adopted processes
    (the no_orphans checker's evidence of escapees) leaves it out; released, it ends and so does the
    incarnation whose report started it."""
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    monkeypatch.setenv("SLOW_GATE", str(gate))  # in the servers' environment; the incarnation's is empty
    w = Workers(tmp_path, {"lazypkg": "", "lazypkg.slow": "import os\nif os.environ.get('SLOW_GATE'):\n"
                                                          "    with open(os.environ['SLOW_GATE']) as f:\n"
                                                          "        f.read()\n"},
                uses=lazy("lazypkg.slow"))
    workers.append(w)
    inc, _ = w.spawn(SLOW_GATE="")
    pool = w.launcher._pool  # noqa: SLF001
    assert pool is not None
    server = psutil.Process(pool.forks.server_pids[0])  # the first incarnation of a run comes from the first
    probes = wait_for(lambda: [c for c in server.children() if c.pid != inc.pid], 30, "the probe to start")
    assert pool.forks.adopted() == [], probes
    with open(gate, "w") as release:
        release.write("go")
    assert inc.ended.wait(30) and inc.exit_code == 3
    assert not [p for p in probes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
