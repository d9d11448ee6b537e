"""Step modules that are hostile while being imported (issue 29, items 5, 7, 9 and 11): each one is refused
in one line naming the module (exit 2), before any run (what the session started for it, its fake services and
fork servers, is stopped: nothing is left). The import is bounded from outside the
importing process (`env.stepmodule.probe`): a module that ignores the time limit's signal, swallows every
exception, or ends its process can neither hang the harness nor end it with the module's own exit code."""

from __future__ import annotations

import os
import signal
import subprocess
import textwrap

import psutil
import pytest

from tests.helpers.agents import wait_for
from tests.helpers.sandbox import Sandbox

MODULES: dict[str, tuple[str, str, str]] = {
    # name: (module source, error code, words of the line)
    "os-exit-0": ("import os\nos._exit(0)\n", "steps-import-exit", "exited with code 0"),
    "os-exit-3": ("import os\nos._exit(3)\n", "steps-import-exit", "exited with code 3"),
    "sigkill-self": ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", "steps-import-killed",
                     "was killed by SIGKILL, by the module itself"),
    "abort": ("import os\nos.abort()\n", "steps-import-killed", "killed by SIGABRT"),
    "sys-exit-3": ("import sys\nsys.exit(3)\n", "steps-import-exit", "sys.exit(3)"),
    "system-exit-text": ("raise SystemExit('bye')\n", "steps-import-exit", "sys.exit('bye')"),
    "ignores-sigalrm": ("import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nwhile True:\n    pass\n",
                        "steps-import-timeout", "within 1 s"),
    "swallows-base-exception": ("import time\nwhile True:\n    try:\n        time.sleep(0.05)\n"
                                "    except BaseException:\n        pass\n", "steps-import-timeout", "within 1 s"),
    "blocks-sigalrm": ("import signal, time\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})\n"
                       "time.sleep(3600)\n", "steps-import-timeout", "within 1 s"),
    "base-exception": ("raise BaseException('odd')\n", "bad-steps-module", "raised BaseException: odd"),
    "generator-exit": ("raise GeneratorExit\n", "bad-steps-module", "raised GeneratorExit"),
    "keyboard-interrupt": ("raise KeyboardInterrupt\n", "bad-steps-module", "raised KeyboardInterrupt"),
    "recursion": ("def f():\n    return f()\nf()\n", "bad-steps-module", "RecursionError"),
    "memory-error": ("raise MemoryError('no room')\n", "bad-steps-module", "MemoryError"),
    "syntax-error": ("def (:\n", "bad-steps-module", "SyntaxError"),
    "closes-its-descriptors-and-ignores-sigalrm": ("import os, signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)"
                                                    "\nos.closerange(3, 4096)\nwhile True:\n    time.sleep(1)\n",
                                                    "steps-import-timeout", "within 1 s"),
    # a step module otherwise sound that writes on the pipe its fork server reports on (the server's check)
    "writes-on-the-servers-pipe": ("import os, sys\nfrom killpoint.reference_agent.invoice_agent import *  # noqa\n"
                                   "from killpoint.reference_agent.invoice_agent import MIGRATIONS, OWN_EFFECTS_SQL\n"
                                   "for arg in sys.argv:\n    if arg.startswith('--protocol-fd='):\n"
                                   "        os.write(int(arg.partition('=')[2]), b'not json\\n')\n",
                                   "bad-steps-module", "reported nothing readable"),
    "exits-from-a-thread-and-waits": ("import os, threading, time\nthreading.Thread(target=lambda: os._exit(7))"
                                      ".start()\ntime.sleep(3600)\n", "steps-import-exit", "exited with code 7"),
}


@pytest.mark.parametrize("name", list(MODULES))
def test_a_hostile_import_is_one_line_and_exit_2(sandbox: Sandbox, name: str) -> None:
    source, code, words = MODULES[name]
    module = "hostile_" + name.replace("-", "_")
    (sandbox.cwd / f"{module}.py").write_text(textwrap.dedent(source))
    argv = sandbox.argv("replay", "--scenario", "crash-points", "--schedule", "plan:step.start:kill", "--steps",
                        module, "--quiet", "--out", str(sandbox.out))
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=sandbox.cwd, stdin=subprocess.DEVNULL,
                          env={**sandbox.env(), "KILLPOINT_IMPORT_TIMEOUT": "1"}, timeout=120)
    err = proc.stderr.strip()
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], err[-2000:])
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"killpoint: error[{code}]: step module {module!r}") and ". Fix: " in err, err
    assert words in err, err
    assert sandbox.survivors() == []
    assert not sandbox.out.exists() or not any(sandbox.out.iterdir())


STDIN_READS = {
    # name: how the module reads its stdin while imported (each gets the end of input at once)
    "read": "PIPED = sys.stdin.read()\nassert PIPED == '', PIPED\n",
    "input": "try:\n    input()\n    raise AssertionError('a line on stdin')\nexcept EOFError:\n    pass\n",
    "os-read-fd-0": "import os\nassert os.read(0, 1) == b''\n",
}


@pytest.mark.parametrize(("spawn", "how"), [("fork", "read"), ("fork", "input"), ("fork", "os-read-fd-0"),
                                            ("exec", "read")])
def test_a_module_reading_stdin_while_imported_reads_its_end(sandbox: Sandbox, spawn: str, how: str) -> None:
    """Wherever the module is imported (the first fork server's check, both servers' preload, a probe child,
    an exec'd worker) its stdin is /dev/null, as for `python worker.py </dev/null`: a read ends at once.
    Never the fork server's command pipe, where it would wait (the harness writes nothing until the server
    is ready) until the import limit refused a sound module as one that hangs."""
    (sandbox.cwd / "stdin_reader.py").write_text(
        "import sys\nfrom killpoint.reference_agent.invoice_agent import *  # noqa: F403\n"
        "from killpoint.reference_agent.invoice_agent import MIGRATIONS, OWN_EFFECTS_SQL  # noqa: F401\n"
        + STDIN_READS[how])
    argv = sandbox.argv("replay", "--scenario", "crash-points", "--schedule", "email:effect.applied:kill",
                        "--steps", "stdin_reader", "--spawn", spawn, "--quiet", "--out", str(sandbox.out))
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=sandbox.cwd, stdin=subprocess.DEVNULL,
                          env={**sandbox.env(), "KILLPOINT_IMPORT_TIMEOUT": "5"}, timeout=120)
    assert proc.returncode == 0, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert sandbox.survivors() == []


def test_a_check_killed_from_outside_is_not_blamed_on_an_exit_of_the_module(sandbox: Sandbox) -> None:
    """The process that imports a sound step module for its check (the first fork server) is SIGKILLed from
    outside while it imports, as the OOM killer would: the one line says the process was killed and that the
    kill may have come from outside, where it said the module ended its process "e.g. os._exit at module
    level"; what the session started is stopped, the second server's import included."""
    (sandbox.cwd / "slow_import.py").write_text(
        "import os, pathlib, time\nfrom killpoint.reference_agent.invoice_agent import *  # noqa: F403\n"
        "from killpoint.reference_agent.invoice_agent import MIGRATIONS, OWN_EFFECTS_SQL  # noqa: F401\n"
        "pathlib.Path(f'importing.{os.getpid()}').write_text('')\ntime.sleep(60)\n")
    argv = sandbox.argv("replay", "--scenario", "crash-points", "--schedule", "plan:step.start:kill", "--steps",
                        "slow_import", "--quiet", "--out", str(sandbox.out))
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=sandbox.cwd,
                            stdin=subprocess.DEVNULL, env={**sandbox.env(), "KILLPOINT_IMPORT_TIMEOUT": "120"})
    try:
        def checking() -> int | None:
            for marker in sandbox.cwd.glob("importing.*"):
                pid = int(marker.suffix[1:])
                try:
                    if "--probe" in psutil.Process(pid).cmdline():
                        return pid
                except psutil.NoSuchProcess:
                    pass
            return None

        os.kill(wait_for(checking, timeout=60, what="the checking fork server's import"), signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    err = err.strip()
    assert proc.returncode == 2, (proc.returncode, out[-2000:], err[-2000:])
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("killpoint: error[steps-import-killed]: step module 'slow_import' could not be checked: "
                          "the process importing it was killed by SIGKILL"), err
    assert "or from outside (the OOM killer" in err and "os._exit" not in err, err
    assert sandbox.survivors() == []

