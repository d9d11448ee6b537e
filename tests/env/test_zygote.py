"""Fork servers forked by a zygote (harness/env/zygote.py) stand in for fresh ones: the same plumbing, the
environment and command line a census reads, their status relayed, death with a SIGKILLed harness, and the
fresh start whenever no zygote can stand in."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from killpoint.env import zygote
from killpoint.env.fork_launcher import ForkLauncher
from killpoint.env.procutil import wait_gone
from killpoint.env.stepmodule import DEFAULT_STEPS
from killpoint.env.zygote import ZYGOTE_VAR, Zygotes
from tests.env.test_launcher import Held
from tests.helpers import pythonpath
from tests.helpers.agents import wait_for
from tests.helpers.sandbox import Sandbox, forked_run
from tests.hostile.test_hostile_imports import MODULES

TAG = "KILLPOINT_TEST_ZYGOTE_TAG"


@pytest.fixture(scope="module")
def zygotes() -> Iterator[Zygotes]:
    """Zygotes of this module's own (the session's may be off), ready before any test uses them."""
    with Zygotes() as z:
        assert z.wait(120), "the zygotes never said ready"
        yield z


def zygote_env(z: Zygotes, **extra: str) -> dict[str, str]:
    return {**os.environ, ZYGOTE_VAR: str(z.folder), TAG: uuid.uuid4().hex, **extra}


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_zygotes_servers_fork_incarnations_and_look_like_fresh_ones(zygotes: Zygotes, pg_dsn: str,
                                                                       tmp_path: Path) -> None:
    """Each server is a child of the zygote of its hash seed, shows the command line and the environment a
    fresh one would (so a census by an environment tag finds it and what it forks), runs the reference
    worker, reports exits and signals, and its exit status reaches the launcher through the zygote."""
    env = zygote_env(zygotes)
    launcher = ForkLauncher([DEFAULT_STEPS], env=env)
    held = Held(tmp_path / "kp.sock")
    try:
        assert [psutil.Process(pid).ppid() for pid in launcher.server_pids] == zygotes.pids
        for pid in launcher.server_pids:
            server = psutil.Process(pid)
            assert server.cmdline()[:4] == [sys.executable, "-m", "killpoint.env.forkserver", DEFAULT_STEPS]
            assert server.cmdline()[4].startswith("--protocol-fd=") and len(server.cmdline()) == 5
            assert server.environ()[TAG] == env[TAG] and zygote.PAD_VAR not in server.environ()
            assert server.cwd() == os.getcwd()
        worker_env = {**env, "DATABASE_URL": pg_dsn, "KILLPOINT_SOCKET": str(held.server.path),
                      "KILLPOINT_INCARNATION": "r-1#1"}
        usage = launcher.spawn("r-0#1", "--bad-usage", "worker", ["--bad-usage"], worker_env, str(tmp_path / "u.log"))
        assert usage.ended.wait(timeout=30) and (usage.exit_code, usage.signal) == (2, None)
        inc = launcher.spawn("r-1#1", "r-1", "worker", ["r-1"], worker_env, str(tmp_path / "w.log"))
        assert held.reached.wait(timeout=30), (tmp_path / "w.log").read_text()
        assert psutil.Process(inc.pid).environ()[TAG] == env[TAG]  # forked, so the server's block: rewritten
        assert inc.send(signal.SIGKILL) and inc.ended.wait(timeout=10)
        assert (inc.exit_code, inc.signal) == (None, signal.SIGKILL)
    finally:
        held.release.set()
        held.server.close()
        launcher.close()
    assert [server._proc.returncode for server in launcher._servers] == [0, 0]  # relayed: its stdin's end
    assert all(gone(pid) for pid in launcher.server_pids)
    assert all(psutil.Process(pid).is_running() for pid in zygotes.pids)


def test_a_server_killed_from_outside_is_reported_with_its_signal(zygotes: Zygotes) -> None:
    launcher = ForkLauncher([DEFAULT_STEPS], env=zygote_env(zygotes))
    try:
        os.kill(launcher.server_pids[1], signal.SIGKILL)
        wait_for(lambda: launcher.died() is not None, 30, "the launcher to see its server die")
        assert "was killed by SIGKILL" in str(launcher.died())
    finally:
        launcher.close()


HARNESS = textwrap.dedent("""
    import os, sys
    from killpoint.env.fork_launcher import ForkLauncher
    from killpoint.env.stepmodule import DEFAULT_STEPS
    launcher = ForkLauncher([DEFAULT_STEPS])
    print(*launcher.server_pids, flush=True)
    sys.stdin.read()  # until the test SIGKILLs us
""")


def test_a_zygotes_servers_die_with_a_sigkilled_harness(zygotes: Zygotes) -> None:
    """The harness's connection to the zygote closes with it: the zygote sends the server the SIGTERM a
    parent-death signal would have, and the server ends with what it forked; the zygote lives on."""
    env = {**zygote_env(zygotes), "PYTHONPATH": pythonpath()}
    harness = subprocess.Popen([sys.executable, "-c", HARNESS], env=env, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    try:
        assert harness.stdout is not None
        pids = [int(p) for p in harness.stdout.readline().split()]
        servers = [psutil.Process(pid) for pid in pids]
        assert [s.ppid() for s in servers] == zygotes.pids
        harness.kill()
        harness.wait()
        assert not wait_gone(servers, 30), "a server outlived its SIGKILLed harness"
        assert all(psutil.Process(pid).is_running() for pid in zygotes.pids)
    finally:
        harness.kill()
        harness.wait()
        if harness.stdin:
            harness.stdin.close()
        if harness.stdout:
            harness.stdout.close()


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_without_a_zygote_that_can_stand_in_servers_start_as_always(zygotes: Zygotes, tmp_path: Path) -> None:
    """No zygote named, a folder no zygote listens in, another start-up variable: `popen` says None (the
    launcher starts a fresh server) and leaves no descriptor open; a launcher's servers are then its own
    children."""
    rfd, wfd = os.pipe()
    try:
        before = open_fds()
        base = {k: v for k, v in os.environ.items() if k != ZYGOTE_VAR}
        args = ["-m", "killpoint.env.forkserver", DEFAULT_STEPS]
        assert zygote.popen(args, {**base, "PYTHONHASHSEED": "2029"}, {wfd: wfd}, pipe_stdin=True) is None
        (tmp_path / zygote.INFO).write_text((zygotes.folder / zygote.INFO).read_text())
        nobody = {**base, ZYGOTE_VAR: str(tmp_path), "PYTHONHASHSEED": "2029"}
        assert zygote.popen(args, nobody, {wfd: wfd}, pipe_stdin=True) is None
        optimized = zygote_env(zygotes, PYTHONHASHSEED="2029", PYTHONOPTIMIZE="1")
        assert zygote.popen(args, optimized, {wfd: wfd}, pipe_stdin=True) is None
        assert open_fds() == before
    finally:
        os.close(rfd)
        os.close(wfd)
    launcher = ForkLauncher([DEFAULT_STEPS], env=zygote_env(zygotes, PYTHONOPTIMIZE="1"))
    try:
        assert [psutil.Process(pid).ppid() for pid in launcher.server_pids] == [os.getpid()] * 2
    finally:
        launcher.close()


def test_closing_the_zygotes_ends_their_servers_and_removes_their_folder() -> None:
    z = Zygotes()
    assert z.wait(120)
    launcher = ForkLauncher([DEFAULT_STEPS], env={**os.environ, ZYGOTE_VAR: str(z.folder)})
    servers = [psutil.Process(pid) for pid in launcher.server_pids]
    zygotes = [psutil.Process(pid) for pid in z.pids]
    z.close()
    try:
        assert not wait_gone(servers + zygotes, 30)
        assert not z.folder.exists()
    finally:
        launcher.close()


REPORT_PPID = "import os; os.write(int(os.environ['KILLPOINT_REPORT_FD']), str(os.getppid()).encode())"


def test_a_bounded_child_is_forked_by_a_zygote_and_still_bounded(zygotes: Zygotes,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """`timelimit.in_child` (the step module's first import, `stepmodule.probe`) forks its `python -c` from
    a zygote where one is named: its report comes back, and past its limit it is killed with its group."""
    from killpoint.env import timelimit  # noqa: PLC0415

    monkeypatch.setenv(ZYGOTE_VAR, str(zygotes.folder))
    child = timelimit.in_child([sys.executable, "-c", REPORT_PPID], 60)
    assert (child.exit_code, int(child.report)) == (0, zygotes.pids[0])
    hung = "import os, time; os.write(int(os.environ['KILLPOINT_REPORT_FD']), str(os.getpid()).encode()); time.sleep(600)"
    child = timelimit.in_child([sys.executable, "-c", hung], 3)
    assert child.exit_code is None and gone(int(child.report))
    child = timelimit.in_child([sys.executable, "-c", "import os; os._exit(7)"], 60)
    assert child.exit_code == 7


@pytest.mark.parametrize("name", ["os-exit-3", "sigkill-self", "ignores-sigalrm", "keyboard-interrupt",
                                  "exits-from-a-thread-and-waits"])
def test_a_hostile_import_probed_in_a_zygotes_child_is_refused_the_same(zygotes: Zygotes, sandbox: Sandbox,
                                                                         name: str) -> None:
    """The hostile step modules of tests/hostile (which run without zygotes), probed in a zygote's child:
    the same one line, exit 2, nothing left."""
    source, code, words = MODULES[name]
    module = "hostile_" + name.replace("-", "_")
    (sandbox.cwd / f"{module}.py").write_text(textwrap.dedent(source))
    argv = sandbox.argv("replay", "--scenario", "crash-points", "--schedule", "plan:step.start:kill", "--steps",
                        module, "--quiet", "--out", str(sandbox.out))
    env = {**sandbox.env(), "KILLPOINT_IMPORT_TIMEOUT": "1", ZYGOTE_VAR: str(zygotes.folder)}
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=sandbox.cwd, stdin=subprocess.DEVNULL,
                          env=env, timeout=120)
    err = proc.stderr.strip()
    assert proc.returncode == 2 and len(err.splitlines()) == 1, (proc.returncode, err[-2000:])
    assert err.startswith(f"killpoint: error[{code}]: step module {module!r}") and words in err, err
    assert sandbox.survivors() == []


def test_a_zygote_of_another_environment_of_the_same_interpreter_does_not_stand_in(zygotes: Zygotes) -> None:
    """A virtualenv's `python` is a link to the same binary with other packages (the examples' tests install
    theirs in one): a zygote started from another environment, or from the same binary by another path, is
    not used. So is one of this environment with other start-up variables."""
    import json  # noqa: PLC0415

    info = json.loads((zygotes.folder / zygote.INFO).read_text())
    env = {**info["env"], "PYTHONHASHSEED": "2029"}
    assert not zygote._unfit(info, env)
    assert zygote._unfit({**info, "prefix": "/some/other/venv"}, env)
    assert zygote._unfit({**info, "executable": os.path.realpath(sys.executable) + "-elsewhere"}, env)
    assert zygote._unfit(info, {**env, "PYTHONNOUSERSITE": "1"})


def test_a_cli_forked_by_a_zygote_says_what_a_fresh_one_says(zygotes: Zygotes, tmp_path: Path) -> None:
    """The sandbox's CLI runs (tests/helpers/sandbox.py `forked_run`) are the zygote's children, and their
    output and exit code are a fresh interpreter's: a listing, a usage error, a bad step module."""
    with Sandbox(tmp_path / "box") as box:
        env = {**box.env(), ZYGOTE_VAR: str(zygotes.folder)}
        parent = forked_run([sys.executable, "-c", "import os, psutil; print(psutil.Process(os.getppid()).pid)"],
                            env, box.cwd, 60)
        assert parent is not None and int(parent.stdout) in zygotes.pids
        typed = [sys.executable, "-c", "def f(x: int): ...\nprint(f.__annotations__)"]  # not zygote.py's future
        forked, fresh = forked_run(typed, env, box.cwd, 60), subprocess.run(typed, capture_output=True, text=True)
        assert forked is not None and forked.stdout == fresh.stdout == "{'x': <class 'int'>}\n", forked
        for args in (["scenarios"], ["run", "--bogus"], ["replay", "--scenario", "crash-points", "--schedule",
                                                           "email:effect.applied:kill", "--steps", "no.such.module"]):
            forked = forked_run(box.argv(*args), env, box.cwd, 120)
            fresh = subprocess.run(box.argv(*args), capture_output=True, text=True, cwd=box.cwd, env=env, timeout=120,
                                   stdin=subprocess.DEVNULL)
            assert forked is not None and (forked.returncode, forked.stdout, forked.stderr) == (
                fresh.returncode, fresh.stdout, fresh.stderr), args
        assert box.survivors() == [] and box.leftover_dirs() == []


OWNER = ("import sys; from killpoint.env.zygote import Zygotes; z = Zygotes(); assert z.wait(120); "
         "print(z.folder, *z.pids, flush=True); sys.stdin.read()")


def test_a_folder_left_by_zygotes_killed_with_their_owner_is_swept_and_only_that(zygotes: Zygotes,
                                                                                 tmp_path: Path) -> None:
    """An owner SIGKILLed with its zygotes (a `killpoint serve` killed whole) leaves their folder: its info
    and dead sockets. The next `Zygotes` sweeps it once it is older than `STALE_AFTER_SECONDS` (aged here by
    its mtime), and leaves a live owner's folder (locked), a young one, and one holding anything else."""
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "TMPDIR": str(tmp_path)})
    try:
        assert owner.stdout is not None
        folder, *pids = owner.stdout.readline().split()
        for pid in map(int, pids):  # the zygotes first: none lives to remove the folder on its way out
            os.kill(pid, signal.SIGKILL)
    finally:
        owner.kill()
        owner.wait()
    dead = Path(folder)
    assert dead.parent == tmp_path and sorted(p.name for p in dead.iterdir()) == sorted(
        [zygote.INFO, *(f"{seed}.sock" for seed in zygote.HASH_SEEDS)])
    young = tmp_path / "kpz-young"
    young.mkdir()
    foreign = tmp_path / "kpz-foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("not a zygote's")
    old = 1_000_000_000
    for path in (dead, foreign, zygotes.folder):
        os.utime(path, (old, old))
    try:
        assert zygote.sweep_stale(tmp_path) == [dead]
        assert zygotes.folder not in zygote.sweep_stale(zygotes.folder.parent)  # locked: its owner lives
        assert zygotes.folder.is_dir()
    finally:
        now = os.stat(tmp_path).st_mtime
        os.utime(zygotes.folder, (now, now))
    assert not dead.exists() and young.is_dir() and (foreign / "notes.txt").is_file()
