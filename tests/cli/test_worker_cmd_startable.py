"""A `--worker-cmd` that cannot start a worker is refused as the line is parsed (harness/cli/validate.py, flow
step 2): its program is not found, it is a Python interpreter whose script is not a file or whose `-m` module
is not found from the working directory, or it holds shell syntax (`>`, `&&`, a leading `NAME=value`) that no
shell will read. Every incarnation would otherwise fail to start and the run would read as an agent that fails
with no faults. Commands that only look like those (code from -c, a module found only by importing its package
or by another interpreter, options before the script, `{run_id}` in the script's name, a program given by its
path, shell syntax inside `sh -c '...'` or inside a quoted argument) are accepted."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from killpoint.cli import validate
from killpoint.errors import UsageError

PY = sys.executable


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory holding `worker.py`, an executable `worker.sh`, a script not made executable, a
    folder and a folder python runs (its `__main__.py`), as a user's project would."""
    (tmp_path / "worker.py").write_text("print('hello')\n")
    sh = tmp_path / "worker.sh"
    sh.write_text("#!/bin/sh\nexit 0\n")
    sh.chmod(sh.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "not_executable.sh").write_text("#!/bin/sh\n")
    (tmp_path / "agent").mkdir()  # a folder with no __main__.py: python says "can't find '__main__' module"
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__main__.py").write_text("print('app')\n")  # a folder python runs
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "worker.py").write_text("print('worker')\n")  # python -m pkg.worker
    (tmp_path / "plug").mkdir()  # a package that extends its __path__ at import: its submodules go unchecked
    (tmp_path / "plug" / "__init__.py").write_text("from pkgutil import extend_path\n__path__ = extend_path(__path__, __name__)\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(("command", "words"), [
    ("nothere-kp-program {run_id}", "'nothere-kp-program' is not on PATH"),
    ("./missing.sh {run_id}", "'./missing.sh' is not an executable file"),
    ("./not_executable.sh {run_id}", "'./not_executable.sh' is not an executable file"),
    (f"{PY} missing.py {{run_id}}", "the script 'missing.py' is not a file"),
    (f"{PY} -u -X dev missing.py {{run_id}}", "the script 'missing.py' is not a file"),
    (f"{PY} -uX dev missing.py {{run_id}}", "the script 'missing.py' is not a file"),
    (f"{PY} -W error -- missing.py {{run_id}}", "the script 'missing.py' is not a file"),
    (f"{PY} agent {{run_id}}", "the script 'agent' is not a file"),
    (f"{PY} -m no_such_kp_module {{run_id}}", "no module 'no_such_kp_module' is found from"),
    (f"{PY} -um no_such_kp_module {{run_id}}", "no module 'no_such_kp_module' is found from"),
    (f"{PY} -mno_such_kp_module {{run_id}}", "no module 'no_such_kp_module' is found from"),
    (f"{PY} -m pkg.wroker {{run_id}}", "no module 'pkg.wroker' is found from"),
    (f"{PY} -m pkg.worker.main {{run_id}}", "'pkg.worker' is a module, not a package"),
], ids=["no-program", "no-program-at-path", "not-executable", "no-script", "no-script-after-options",
        "no-script-after-a-cluster", "no-script-after-dashdash", "a-folder", "no-module", "no-module-in-a-cluster",
        "no-module-joined", "no-submodule", "a-module-as-a-package"])
def test_a_command_that_cannot_start_is_refused_naming_what_is_missing(here: Path, command: str, words: str) -> None:
    with pytest.raises(UsageError) as caught:
        validate.worker_cmd(command)
    assert caught.value.code == "worker-cmd-not-found"
    assert words in caught.value.message and command in caught.value.message, caught.value.message
    assert "\n" not in caught.value.line()


@pytest.mark.parametrize(("command", "words", "fix"), [
    (f"{PY} worker.py {{run_id}} > worker.log", "the shell syntax '>'", "sh -c"),
    (f"cd here && {PY} worker.py {{run_id}}", "the shell syntax '&&'", "sh -c"),
    (f"{PY} worker.py {{run_id}} 2>&1 | tee log", "the shell syntax '2>&1'", "sh -c"),
    (f"OPENAI_API_KEY=x {PY} worker.py {{run_id}}", "starts with the variable 'OPENAI_API_KEY=x'",
     "env OPENAI_API_KEY=x"),
], ids=["redirect", "and-list", "pipe", "leading-variable"])
def test_shell_syntax_in_a_command_no_shell_reads_is_refused_with_the_wrapping_that_works(
        here: Path, command: str, words: str, fix: str) -> None:
    """killpoint runs the command without a shell: `>`, `&&`, `|` would reach the worker as arguments, and a
    leading `NAME=value` would be taken for the program."""
    with pytest.raises(UsageError) as caught:
        validate.worker_cmd(command)
    assert caught.value.code == "worker-cmd-shell-syntax"
    assert words in caught.value.message and fix in caught.value.fix, caught.value.line()
    assert "\n" not in caught.value.line()


@pytest.mark.parametrize("command", [
    f"{PY} worker.py {{run_id}}",
    f"{PY} -u -X dev worker.py {{run_id}}",
    f"{PY} -Xdev worker.py {{run_id}}",
    f"{PY} -- worker.py {{run_id}}",
    f"{PY} -m pkg.worker {{run_id}}",
    f"{PY} -um pkg.worker {{run_id}}",
    f"{PY} -m pkg {{run_id}}",
    f"{PY} -m app {{run_id}}",
    f"{PY} -m json.tool {{run_id}}",
    f"{PY} -m killpoint.env.egress {{run_id}}",
    f"{PY} -m plug.found_by_importing {{run_id}}",
    f"{PY} -m {{run_id}}",
    "/usr/bin/python3 -m not_this_interpreters_path {run_id}",
    f"{PY} -c 'import sys; print(sys.argv)' {{run_id}}",
    f"{PY} -uc 'print(1)' {{run_id}}",
    f"{PY} - {{run_id}}",
    f"{PY} {{run_id}}.py",
    f"{PY} app {{run_id}}",
    "./worker.sh {run_id}",
    "sh -c 'python missing.py \"$0\"' {run_id}",
    "sh -c 'cd app && exec python worker.py \"$0\" > log' {run_id}",
    f"{PY} worker.py --sql 'SELECT 1;' --sep '|' {{run_id}}",
    f"{PY} worker.py --url http://127.0.0.1/?a=1&b=2 {{run_id}}",
    f"env OPENAI_API_KEY=x {PY} worker.py {{run_id}}",
    "node missing.js {run_id}" if os.path.exists("/usr/bin/node") else "env python missing.py {run_id}",
], ids=["script", "options-then-script", "joined-value", "dashdash", "module", "module-in-a-cluster", "a-package",
        "a-namespace-folder", "stdlib", "through-an-import-hook", "extended-path", "run-id-as-module",
        "module-of-another-interpreter", "code",
        "code-in-a-cluster", "stdin", "run-id-in-the-name", "folder-with-a-main", "executable-by-path", "through-a-shell",
        "shell-syntax-inside-sh-c", "operators-inside-quoted-arguments", "ampersand-inside-a-word", "variable-through-env",
        "another-interpreter"])
def test_a_command_that_only_looks_like_one_is_accepted(here: Path, command: str) -> None:
    """What the check cannot see without running the command (a shell's script, a module found by import,
    another interpreter's script) is left to the run: it is never refused on a guess."""
    assert validate.worker_cmd(command) == command
