"""The preloaded egress guard of a `--worker-cmd` that is not Python (harness/env/egress_shim.py), in a real
program under `LD_PRELOAD`: another interpreter (`/usr/bin/python3 -S`, whose sockets are libc's) and bash's
`/dev/tcp`. TEST-NET-3 (203.0.113.0/24) never answers: a refusal is immediate, never a timeout."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from killpoint.env import cshim, egress, egress_shim

pytestmark = pytest.mark.skipif(egress_shim.library() is None, reason="no C compiler builds the shim (install cc)")

PROBE = '''
import socket, sys
def attempt(what, f):
    try:
        f()
        print(what, "ok")
    except OSError as exc:
        print(what, "refused" if exc.errno in (13, -4) else f"failed {exc.errno}")
def udp(host):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(b"x", (host, 9))
def tcp(host):
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.settimeout(0.5)
        try:
            s.connect((host, 9))
        except (ConnectionRefusedError, TimeoutError):
            pass  # reached: nothing listens there, or nothing answers
for host in sys.argv[1:]:
    attempt(f"connect {host}", lambda: tcp(host))
    attempt(f"sendto {host}", lambda: udp(host))
    attempt(f"resolve {host}", lambda: socket.getaddrinfo(host, 9))
'''

OTHER_PYTHON = next((p for p in ("/usr/bin/python3", shutil.which("python3") or "") if p and os.path.exists(p)), None)


def probe(allow: str | None, *hosts: str, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """PROBE in another interpreter under the shim, `egress.ALLOW_VAR` set to `allow` (None: unset)."""
    lib = egress_shim.library()
    assert lib is not None and OTHER_PYTHON is not None
    env = {k: v for k, v in os.environ.items() if k != egress.ALLOW_VAR}
    env = {**env, "LD_PRELOAD": lib, **({egress.ALLOW_VAR: allow} if allow is not None else {}), **(extra or {})}
    return subprocess.run([OTHER_PYTHON, "-S", "-c", PROBE, *hosts], env=env, capture_output=True, text=True,
                          timeout=60)


def lines(done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    return dict(line.rsplit(" ", 1) for line in done.stdout.splitlines())


def test_an_address_off_the_machine_is_refused_before_any_packet_and_said() -> None:
    done = probe("", "203.0.113.7", "::ffff:203.0.113.7")
    got = lines(done)
    assert all(got[f"{call} {host}"] == "refused" for call in ("connect", "sendto", "resolve")
               for host in ("203.0.113.7", "::ffff:203.0.113.7")), (got, done.stderr)
    said = [line for line in done.stderr.splitlines() if line.startswith(egress.MARKER)]
    assert f"{egress.MARKER} 203.0.113.7:9 from connect in " in done.stderr and len(said) == 6, done.stderr


def test_a_name_off_the_machine_is_refused_before_its_dns_query() -> None:
    done = probe("", "api.anthropic.com")
    assert lines(done)["resolve api.anthropic.com"] == "refused", done.stdout + done.stderr
    assert f"{egress.MARKER} api.anthropic.com:9 from getaddrinfo in " in done.stderr


def test_loopback_and_this_machine_are_reached() -> None:
    """The look-alike that is correct: loopback in every spelling, and this machine's own name."""
    hosts = ("127.0.0.1", "127.8.9.10", "::1", "localhost", "x.localhost", "0.0.0.0", socket.gethostname())
    done = probe("", *hosts)
    got = lines(done)
    assert not [k for k, v in got.items() if v == "refused"], (got, done.stderr)
    assert egress.MARKER not in done.stderr


def test_allowed_hosts_pass_and_the_guard_is_off_unset_or_star() -> None:
    allowed = lines(probe("203.0.113.7, 203.0.113.8", "203.0.113.7", "203.0.113.8", "203.0.113.9"))
    assert allowed["sendto 203.0.113.7"] == allowed["sendto 203.0.113.8"] == "ok", allowed
    assert allowed["sendto 203.0.113.9"] == "refused", allowed
    for off in (None, "*"):
        assert lines(probe(off, "203.0.113.9"))["sendto 203.0.113.9"] == "ok"


def test_a_refusal_reaches_the_harness_as_an_egress_blocked_note(tmp_path: Path) -> None:
    """As the Python guard's (killpoint.env.egress.flush): one JSON line on `KILLPOINT_SOCKET`."""
    path = str(tmp_path / "kp.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(4)
    got: list[bytes] = []

    def take() -> None:
        conn, _ = server.accept()
        with conn:
            got.append(conn.makefile("rb").readline())

    reader = threading.Thread(target=take)
    reader.start()
    done = probe("", "203.0.113.7", extra={"KILLPOINT_SOCKET": path, "KILLPOINT_RUN_ID": 'run-"1"',
                                             "KILLPOINT_INCARNATION": "run-1#2"})
    reader.join(timeout=30)
    server.close()
    assert got, done.stderr
    note = json.loads(got[0])
    assert {k: note[k] for k in ("v", "kind", "note", "run_id", "host", "port", "incarnation")} == {
        "v": 1, "kind": "note", "note": "egress.blocked", "run_id": 'run-"1"', "host": "203.0.113.7", "port": 9,
        "incarnation": "run-1#2"}, note
    assert note["site"].startswith("connect in ") and note["pid"] > 0, note


def test_a_statically_linked_program_is_told_apart(tmp_path: Path) -> None:
    """A preloaded library never loads in a static program (Go's default build): the session says so."""
    (tmp_path / "main.c").write_text("int main(void) { return 0; }\n")
    (tmp_path / "script.sh").write_text("#!/bin/sh\nexit 0\n")
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    built = subprocess.run([str(compiler), "-static", "-o", str(tmp_path / "static"), str(tmp_path / "main.c")],
                           capture_output=True, text=True)
    if built.returncode != 0:
        pytest.skip(f"no static C library to link with: {built.stderr.strip()[-200:]}")
    assert egress_shim.static_program(str(tmp_path / "static"))
    assert not egress_shim.static_program("sh") and not egress_shim.static_program(sys.executable)
    assert not egress_shim.static_program(str(tmp_path / "script.sh"))
    assert not egress_shim.static_program(str(tmp_path / "absent"))


def test_the_library_is_built_once_and_kept_by_its_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In killpoint's cache folder, as the Postgres template: a cache, never left in a session's temp dir."""
    monkeypatch.setenv("KILLPOINT_CACHE_DIR", str(tmp_path))
    first = cshim.build("egress-guard", egress_shim.SOURCE)
    assert first is not None and Path(first).parent == tmp_path / "shims" and os.path.isfile(first)
    assert cshim.build("egress-guard", egress_shim.SOURCE) == first
    assert cshim.build("egress-guard", egress_shim.SOURCE + "\n") != first
    assert cshim.build("broken", "this is not C") is None
    assert sorted(p.name for p in Path(cshim.shim_dir()).iterdir() if p.is_dir()) == []  # no scratch left
