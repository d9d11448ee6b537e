"""Bad input is refused before anything starts, in one line naming the problem and the fix (exit 2).

1. ``Parser`` is the command line's ``ArgumentParser``: argparse's own errors (an unknown option, a
   missing value, a bad choice) become a ``UsageError`` instead of the usage block and exit 2 argparse
   prints. Sub-parsers inherit the class.
2. The option types (``grace``, ``budget``, ``count``, ``seed``, ``worker_cmd``) check ranges and shapes
   as the line is parsed: a value outside its range is refused there, never half-used later. A
   ``--worker-cmd`` whose program is not found, or whose Python script is not a file (or ``-m`` module not
   found), is refused there too (every incarnation would fail to start, and the run would read as an agent
   that fails with no faults); so is an ``--allow-egress`` that no host matches (``egress_host``).
3. ``check_paths(out, junit, store)`` proves ``--out`` can be created and written, and ``--junit`` written, before a
   run begins (not after an hour of trials); and, for ``run`` and ``explore`` without ``--no-store``, the
   failure store under the current directory (``.killpoint/failures``), which they write at the end. A name
   longer than the file system allows, a ``--junit`` that is no regular file (``/dev/full``) or whose folder
   does not exist, and a ``--out`` on a file system with no room left are refused there too.
4. ``schedule_text`` (the type of ``--schedule``) refuses a schedule of no fault (a replay of it would test
   nothing and pass) or of more than ``MAX_FAULTS`` faults.
5. ``check_args(args)``, once they are parsed, refuses what no single option type can see: an empty ``--dsn``
   (it would silently mean "no DSN": a throwaway server instead of the database the user named).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import NoReturn

from killpoint.errors import UsageError

MAX_GRACE = 3600.0
MAX_BUDGET = 7 * 24 * 3600.0
MAX_RUN_TIMEOUT = 24 * 3600.0
MAX_RANDOM = 100_000
MAX_SEED = 2**63 - 1
MAX_FAULTS = 64
"""The most faults one schedule may hold (flow step 4). Each fault that fires ends an incarnation and starts
another, and a run has a time budget (``--run-timeout``, 60 s by default): a schedule past this bound
would end as a liveness failure of the harness's making, not the agent's. Generated schedules hold at most
one fault per step of the agent (``faults.schedule.fault_budget``), far below it."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one-line ``UsageError``s (flow step 1)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError("bad-option", f"{self.prog}: {message}", f"see `{self.prog} --help`")


def _number(text: str, what: str, low: float, high: float, *, integer: bool = False,
            low_open: bool = False) -> float:
    try:
        value = float(int(text)) if integer else float(text)
    except ValueError:
        kind = "a whole number" if integer else "a number"
        raise argparse.ArgumentTypeError(f"{what.lstrip('-')} must be {kind}, not {text!r}") from None
    if math.isnan(value) or math.isinf(value) or value > high or value < low or (low_open and value == low):
        bound = f"more than {low:g}" if low_open else f"at least {low:g}"
        raise argparse.ArgumentTypeError(f"{what.lstrip('-')} must be {bound} and at most {high:g}, not {text!r}")
    return value


def grace(text: str) -> float:
    """``--grace``: seconds between SIGTERM and SIGKILL, 0..3600."""
    return _number(text, "--grace", 0.0, MAX_GRACE)


def run_timeout(text: str) -> float:
    """``--run-timeout``: seconds one run may take, 1..MAX_RUN_TIMEOUT."""
    return _number(text, "--run-timeout", 1.0, MAX_RUN_TIMEOUT)


def budget(text: str) -> float:
    """``--budget``: seconds of random exploration per scenario, 0..7 days."""
    return _number(text, "--budget", 0.0, MAX_BUDGET)


def count(text: str) -> int:
    """``--random N``: how many random schedules, 1..100000."""
    return int(_number(text, "--random", 1, MAX_RANDOM, integer=True))


def seed(text: str) -> int:
    """``--seed``: 0 .. 2**63-1."""
    return int(_number(text, "--seed", 0, MAX_SEED, integer=True))


def worker_cmd(text: str) -> str:
    """``--worker-cmd``: a non-empty command line that parses as a shell's words would."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} does not parse as a command ({exc}): close its quotes") from None
    if not words:
        raise argparse.ArgumentTypeError("it is empty: give the command that starts one worker, "
                                         "e.g. 'node worker.js {run_id}'")
    missing = _not_startable(words, _unquoted(text))
    if missing:
        code, problem, fix = missing
        raise UsageError(code, f"--worker-cmd {text!r} cannot start a worker: {problem}", fix)
    return text


_HOST_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)")
"""One label of a host name (`api`, `stripe`, `com`): letters, digits, `-` (not at an end) and `_`."""


def egress_host(text: str) -> str:
    """``--allow-egress``: `*`, or hosts (a name or an address; several may be joined by commas), as the
    egress guard matches them (harness/env/egress.py: the host a worker connects to, exactly, case-insensitive).
    A URL, a path, a port or a wildcard would match no host, and the worker would be refused at run time: they
    are refused here, naming the host to give. Returns the hosts lowercased."""
    hosts = [h.strip() for h in text.split(",")]
    if text.strip() == "*":
        return "*"
    out = []
    for host in hosts:
        problem, fix = _host_problem(host)
        if problem:
            raise UsageError("bad-allow-egress", f"--allow-egress {text!r}: {problem}", fix)
        out.append(host.strip("[]").rstrip(".").lower())
    return ",".join(out)


def _host_problem(host: str) -> tuple[str | None, str]:
    """Why `host` is no host the egress guard can match (`egress_host`), and the fix; (None, "") if it is one."""
    import ipaddress
    from urllib.parse import urlsplit

    if not host:
        return "it names an empty host", "give a host, e.g. --allow-egress api.example.com (repeatable)"
    if "://" in host:
        name = urlsplit(host).hostname or "the host"
        return f"{host!r} is a URL, and the guard matches hosts", f"give its host: --allow-egress {name}"
    if "/" in host:
        return f"{host!r} holds a path, and the guard matches hosts", \
            f"give the host alone: --allow-egress {host.split('/')[0]}"
    if "*" in host:
        return (f"{host!r} is a pattern, and the guard matches each host exactly", "name each host the worker "
                "reaches (repeat --allow-egress), or give '*' to turn the guard off")
    bare = host.strip("[]")
    try:
        ipaddress.ip_address(bare.split("%")[0])
        return None, ""
    except ValueError:
        pass
    if ":" in host:
        name = host.rsplit(":", 1)[0]
        return f"{host!r} names a port, and the guard matches hosts on every port", f"give the host alone: " \
            f"--allow-egress {name}"
    name = host.rstrip(".").lower()
    if len(name) > 253 or not all(_HOST_LABEL.fullmatch(label) for label in name.split(".")):
        return f"{host!r} is not a host name or an address", "give a host, e.g. --allow-egress api.example.com"
    return None, ""


SHELL_OPERATORS = frozenset({"&&", "||", "|", "&", ";", ">", ">>", "<", "2>", "2>&1", "&>"})
"""Words a shell would read as syntax, which without one reach the worker as arguments (`python w.py {run_id}
> log` gives the worker `>` and `log`)."""

PYTHON_VALUE_OPTIONS = frozenset({"-W", "-X", "--check-hash-based-pycs"})
"""The interpreter's options that take the next word as their value (`python -X dev script.py`)."""


def _unquoted(text: str) -> list[str]:
    """The words of `text` as written, quotes kept (`'|'` stays quoted, a bare `|` is bare); [] if they
    cannot be read that way."""
    lexer = shlex.shlex(text, posix=False)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:
        return []


def _not_startable(words: list[str], written: list[str]) -> tuple[str, str, str] | None:
    """Why the command could not start a worker as meant, found without running it (flow step 2): shell
    syntax (a bare operator among `written`, a leading `NAME=value`) in a command no shell reads, a program
    not on PATH (nor an executable file at the path given), or a Python interpreter whose script is not a
    file (relative to the working directory, which every incarnation shares) or whose `-m` module is not
    found (`_module_missing`). Anything else, even a script that fails, is the agent's to answer for (a
    crash-free run that fails)."""
    no_shell = "but killpoint runs the command itself, with no shell"
    shell = [w for w in written if w in SHELL_OPERATORS]  # bare: a quoted '|' is an argument the user meant
    if shell:
        return ("worker-cmd-shell-syntax", f"it holds the shell syntax {shell[0]!r}, {no_shell} (the word would "
                "reach the worker as an argument)", "wrap it in a shell: --worker-cmd \"sh -c 'cd app && exec "
                "python worker.py \\\"$0\\\"' {run_id}\"")
    program = words[0]
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", program):
        return ("worker-cmd-shell-syntax", f"it starts with the variable {program!r}, {no_shell}",
                f"set it with env: --worker-cmd 'env {program} ...'")
    if "{run_id}" not in program and shutil.which(program) is None:
        if os.sep in program:
            return ("worker-cmd-not-found", f"{program!r} is not an executable file",
                    "give the path of an executable (chmod +x it)")
        return "worker-cmd-not-found", f"{program!r} is not on PATH", "install it, or give its full path"
    if not re.fullmatch(r"python[0-9.]*", os.path.basename(program)):
        return None
    rest = iter(words[1:])
    script = None
    for word in rest:
        if word == "--":
            script = next(rest, None)  # the end of the options: the script comes next
            break
        if word in PYTHON_VALUE_OPTIONS:
            next(rest, None)
        elif word == "-" or word.startswith("--"):
            return None  # the code comes from stdin, or an option this check does not know: no script to find
        elif word.startswith("-"):
            for i, flag in enumerate(word[1:], 1):
                if flag == "m":  # -m MODULE (also in a cluster, -um, or joined, -mpkg.worker): no script
                    module = word[i + 1:] or next(rest, "")
                    missing = _module_missing(module, program)
                    return None if missing is None else ("worker-cmd-not-found", missing, "give the module's "
                                                         "dotted name as `python -m` finds it from the working "
                                                         "directory, or run killpoint from the folder it is in")
                if flag == "c":
                    return None  # -c CODE (also in a cluster: -uc): no script
                if flag in "WX":
                    if i == len(word) - 1:
                        next(rest, None)  # the value is the next word (-X dev, -uX dev)
                    break  # or the rest of this one (-Xdev)
        else:
            script = word
            break
    if script is None or "{run_id}" in script or os.path.isfile(script) or \
            os.path.isfile(os.path.join(script, "__main__.py")):  # python runs a folder by its __main__.py
        return None
    return ("worker-cmd-not-found", f"the script {script!r} is not a file, nor a folder with a __main__.py (looked for from {os.getcwd()})",
            "give the script's path, or run killpoint from the folder it is relative to")


def _module_missing(module: str, program: str) -> str | None:
    """Why `program -m module` would find no module to run (`No module named ...`), found without importing
    anything, or None when it is found or this check cannot tell: another interpreter than killpoint's (its
    import path is not this one's), `{run_id}` in the name, a package found only through an import hook (an
    editable install's finder), or a submodule of a package that extends its own `__path__` at import."""
    from importlib.machinery import PathFinder
    from importlib.util import find_spec

    from killpoint.env.pycommand import same_interpreter

    if not module or "{run_id}" in module or not same_interpreter(program):
        return None
    parts = module.split(".")
    path: list[str] | None = [os.getcwd(), *sys.path]  # -m puts the working directory first
    for depth in range(len(parts)):
        name = ".".join(parts[: depth + 1])
        spec = PathFinder.find_spec(name, path)
        if spec is None and depth == 0:
            try:
                hooked = find_spec(name)  # built in, frozen, or an import hook's: a top-level name imports nothing
            except (ImportError, ValueError):
                hooked = None
            if hooked is not None:
                return None
        if spec is None:
            return f"no module {name!r} is found from {os.getcwd()} (python -m {module} would say `No module named`)"
        if depth < len(parts) - 1 and not spec.submodule_search_locations:
            return f"{name!r} is a module, not a package, so it holds no {'.'.join(parts[: depth + 2])!r}"
        if depth < len(parts) - 1 and _extends_path(spec.origin):
            return None  # found only by importing the package
        path = list(spec.submodule_search_locations or [])
    return None


def _extends_path(init: str | None) -> bool:
    """True if the package whose `__init__.py` is `init` may add folders to its `__path__` at import
    (pkgutil's `extend_path`, pkg_resources' namespaces): its submodules cannot be found without importing it."""
    if not init or not init.endswith("__init__.py"):
        return False
    try:
        return "__path__" in Path(init).read_text(errors="replace")
    except OSError:
        return True


def schedule_text(text: str) -> str:
    """``--schedule``: at most ``MAX_FAULTS`` faults (each is parsed against the agent's steps later)."""
    faults = sum(1 for token in text.split(",") if token.strip())
    if not faults:
        raise argparse.ArgumentTypeError(
            f"{text!r} holds no fault, so a replay of it would test nothing: name one, e.g. "
            "'email:effect.applied:kill', or replay a seed with --seed N")
    if faults > MAX_FAULTS:
        raise argparse.ArgumentTypeError(
            f"a schedule of {faults} faults is more than the {MAX_FAULTS} one run can hold (each fault restarts the "
            f"worker within the run's time budget): split it into several replays, or shrink it")
    return text


def check_args(args: argparse.Namespace) -> None:
    """Flow step 5: what the parsed arguments hold together, refused in one UsageError each."""
    dsn = getattr(args, "dsn", None)
    if dsn is not None and not dsn.strip():
        raise UsageError("dsn-empty", "--dsn is empty, which would silently start a throwaway server instead of "
                         "using a database of yours", "give --dsn a test database's URL, e.g. "
                         "postgresql://user@127.0.0.1:5432/app_test, or drop --dsn (killpoint then starts its own)")


ROOM_BYTES = 1 << 20
"""The free space ``--out`` needs at the start: a run directory's first writes (a history, meta.json)."""


def _short_names(path: Path, option: str) -> None:
    """Every component of ``path`` fits in a file name (255 bytes on the common file systems)."""
    for part in path.parts:
        if len(os.fsencode(part)) > 255:
            raise UsageError("path-not-writable", f"{option}: the name {part[:40]}... is {len(os.fsencode(part))} "
                             "bytes, longer than a file name may be (255)", f"give {option} a shorter path")


def _writable_dir(path: Path, option: str, fix: str | None = None) -> None:
    """``path`` exists as a writable directory, or its nearest existing parent is one (it can be made)."""
    _short_names(path, option)
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        raise UsageError("path-not-writable", f"{option} {path}: {probe} is not a directory",
                         f"give {option} a folder (or a path under one) that you can write to")
    try:  # a real write (as root, os.access says yes to a read-only file system or /proc)
        fd, probe_file = tempfile.mkstemp(prefix=".killpoint-probe-", dir=probe)
        os.close(fd)
        os.unlink(probe_file)
    except OSError as exc:
        raise UsageError("path-not-writable", f"{option} {path}: cannot write in {os.path.abspath(probe)} "
                         f"({exc.strerror})", fix or f"give {option} a folder you can write to, or fix its "
                         "permissions") from None


def _room(path: Path, option: str) -> None:
    """The file system under ``path`` (its nearest existing folder) has ``ROOM_BYTES`` free."""
    probe = path
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    try:
        stat = os.statvfs(probe)
    except OSError:
        return
    if stat.f_bavail * stat.f_frsize < ROOM_BYTES:
        raise UsageError("no-room", f"{option} {path}: the file system of {os.path.abspath(probe)} has "
                         f"{stat.f_bavail * stat.f_frsize // 1024} KiB free, too little for a run directory",
                         f"free some space there, or give {option} a folder on another file system")


def check_paths(out: str | None, junit: str | None, store: bool = False) -> None:
    """``--out`` and ``--junit`` writable, and with ``store`` the failure store, checked before anything starts
    (flow step 3)."""
    if out is not None:
        _writable_dir(Path(out), "--out")
        _room(Path(out), "--out")
    if store:
        from killpoint.run.store import DEFAULT_ROOT  # noqa: PLC0415 - the suite's, imported with it

        _writable_dir(DEFAULT_ROOT, "the failure store", "run killpoint from a folder you can write to, or pass "
                      "--no-store (failing schedules are then not remembered)")
    if junit:
        path = Path(junit)
        _short_names(path, "--junit")
        if path.exists() and not path.is_file() and not path.is_dir():
            raise UsageError("path-not-writable", f"--junit {junit} is not a regular file",
                             "give --junit a file name, e.g. --junit killpoint.xml")
        if not path.parent.exists():
            raise UsageError("path-not-writable", f"--junit {junit}: the folder {path.parent} does not exist",
                             f"create it first (mkdir -p {path.parent}), or give --junit a file in an existing folder")
        if path.is_dir():
            raise UsageError("path-not-writable", f"--junit {junit} is a directory",
                             "give --junit a file name, e.g. --junit killpoint.xml")
        if path.exists():
            if not os.access(path, os.W_OK):
                raise UsageError("path-not-writable", f"--junit {junit} is not writable by this user",
                                 "give --junit a file you can write, or fix its permissions")
        else:
            _writable_dir(path.parent, "--junit")
