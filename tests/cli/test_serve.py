"""`killpoint serve` (harness/cli/serve.py): a session started with the zygotes and the database it prints
forks its fork servers from those zygotes and passes as it does on its own; SIGTERM (what Ctrl-C does)
stops the zygotes and the Postgres and removes their folders; a SIGKILLed serve leaves nothing running.

Real processes throughout: the served session is found forking from serve's zygotes by a census of the
process tree taken while it runs (at its first progress line on stderr, a barrier on its output)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from killpoint.cli.serve import parse_ready
from killpoint.env.zygote import ZYGOTE_VAR
from tests.helpers.sandbox import Sandbox


@dataclass
class Served:
    proc: subprocess.Popen[str]
    folder: Path
    dsn: str
    said: list[str]


def start(sandbox: Sandbox) -> Served:
    """`killpoint serve --postgres local` in the sandbox, read up to its ready lines (`serve.parse_ready`)."""
    proc = sandbox.start("serve", "--postgres", "local")
    assert proc.stdout is not None
    said: list[str] = []

    def lines() -> Iterator[str]:
        for line in proc.stdout:  # type: ignore[union-attr]
            said.append(line.rstrip("\n"))
            yield line

    ready = parse_ready(lines())
    assert ready, (said, proc.poll(), proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
    return Served(proc, Path(ready[0]), ready[1], said)


@pytest.fixture
def served(sandbox: Sandbox) -> Iterator[Served]:
    s = start(sandbox)
    try:
        yield s
    finally:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait(timeout=30)


def zygote_pids(served: Served) -> set[int]:
    return {p.pid for p in psutil.Process(served.proc.pid).children()
            if "killpoint.env.zygote" in " ".join(p.cmdline())}


def test_a_served_session_forks_its_servers_from_serves_zygotes_and_passes(sandbox: Sandbox, served: Served) -> None:
    zygotes = zygote_pids(served)
    assert len(zygotes) == 2, served.said
    env = {**sandbox.env(), ZYGOTE_VAR: str(served.folder)}
    session = subprocess.Popen(sandbox.argv("explore", "--scenario", "crash-points", "--exhaustive", "--dsn", served.dsn,
                                            "--out", str(sandbox.out)),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=sandbox.cwd, env=env,
                               stdin=subprocess.DEVNULL)
    assert session.stderr is not None
    own: list[str] | None = None
    zygotes_children: list[str] = []
    lines = []
    for line in session.stderr:  # the fork servers live as long as the session: look at its first trial's line
        lines.append(line)
        if re.match(r"^crash-points: \[1/", line):
            own = [" ".join(p.cmdline()) for p in psutil.Process(session.pid).children(recursive=True)]
            zygotes_children = [" ".join(p.cmdline()) for z in zygotes for p in psutil.Process(z).children()]
            break
    out, err = session.communicate(timeout=300)
    text = out + "".join(lines) + err
    assert session.returncode == 0, text
    assert re.search(r"^PASS\s+crash-points\s+\d+ schedules", text, re.MULTILINE), text
    assert own is not None, text
    assert sum("killpoint.env.forkserver" in c for c in zygotes_children) == 2, zygotes_children
    assert not any("killpoint.env.forkserver" in c for c in own), own  # not started by the session itself
    assert psutil.wait_procs([psutil.Process(z) for z in zygotes], timeout=0)[1], "the zygotes stay up"


def test_sigterm_stops_serve_and_leaves_nothing(sandbox: Sandbox, served: Served) -> None:
    served.proc.send_signal(signal.SIGTERM)
    out, err = served.proc.communicate(timeout=60)
    assert served.proc.returncode == 143, out + err
    assert "Traceback" not in err, err
    assert not served.folder.exists()
    assert sandbox.survivors() == [], sandbox.survivors()
    assert sandbox.leftover_dirs() == [], sandbox.leftover_dirs()


def test_a_sigkilled_serve_leaves_nothing_running(sandbox: Sandbox, served: Served) -> None:
    """The zygotes end on their stdin's end and the Postgres on its parent-death signal; the cluster's folder
    is the next killpoint's reaper's to remove."""
    left = [psutil.Process(served.proc.pid), *psutil.Process(served.proc.pid).children(recursive=True)]
    served.proc.kill()
    served.proc.wait(timeout=30)
    _, alive = psutil.wait_procs(left, timeout=60)
    assert alive == [], alive
    assert sandbox.survivors() == [], sandbox.survivors()


def test_a_provider_that_is_not_there_is_one_line_and_nothing_left(sandbox: Sandbox) -> None:
    """The zygotes, started before the Postgres is chosen, are stopped mid-import without a word of their own."""
    if os.environ.get("DOCKER_HOST") or Path("/var/run/docker.sock").exists():
        pytest.skip("a Docker engine is here: --postgres docker would start")
    done = sandbox.run("serve", "--postgres", "docker", timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("killpoint: error[no-docker]:"), done.stderr
    assert sandbox.survivors() == [], sandbox.survivors()
    assert sandbox.leftover_dirs() == [], sandbox.leftover_dirs()
