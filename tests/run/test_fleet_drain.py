"""The fleet's end (`run.fleet.drain`) sends SIGTERM only to workers not already sent one: a worker a `term`
fault hit is draining, and one that put its handler back on its way out (as the reference worker does once its
drain is over) would be ended by a second SIGTERM, which no deploy sends. A clean-clone run saw it: the fleet's
last run finished by the drained worker, the fleet's end SIGTERMed it again as it exited, and
`drains_on_sigterm` failed a worker that had drained ("ended with signal 15 after SIGTERM, not exit 0").

Real processes: each worker reports over a unix socket (a barrier) that it is ready, and that it drained."""

from __future__ import annotations

import signal
import socket
import sys
from pathlib import Path

from killpoint.env.exec_launcher import ExecLauncher
from killpoint.run.fleet import drain
from killpoint.run.history import History

WORKER = r'''
import signal, socket, sys
conn = socket.socket(socket.AF_UNIX)
conn.connect(sys.argv[1])
def on_term(*_):
    if sys.argv[2] == "exits":
        sys.exit(0)                                  # a queue worker with nothing in flight: drained
    signal.signal(signal.SIGTERM, signal.SIG_DFL)    # drained; its exit path puts the default handler back
    conn.sendall(b"drained\n")
signal.signal(signal.SIGTERM, on_term)
conn.sendall(b"ready\n")
while True:
    signal.pause()
'''
GRACE = 1.0


def test_the_fleets_end_does_not_sigterm_a_worker_again(tmp_path: Path) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    path = str(tmp_path / "w.sock")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(path)
        server.listen(2)
        launcher = ExecLauncher([sys.executable, str(script), path, "{run_id}"])
        try:
            termed = launcher.spawn("w1", "stays", "queue", [], {}, None)
            first, _ = server.accept()
            other = launcher.spawn("w2", "exits", "queue", [], {}, None)
            second, _ = server.accept()
            lines = first.makefile("r"), second.makefile("r")
            assert [f.readline() for f in lines] == ["ready\n", "ready\n"]
            assert termed.send(signal.SIGTERM) and termed.termed  # the nemesis's `term`
            assert lines[0].readline() == "drained\n"
            history = History(tmp_path / "history.jsonl")
            drain([termed, other], GRACE, history)
            assert (other.exit_code, other.signal) == (0, None)  # SIGTERMed by the fleet's end: drained
            # not SIGTERMed again: still there when the grace ran out, then SIGKILLed (never ended by SIGTERM)
            assert termed.signal == signal.SIGKILL, (termed.exit_code, termed.signal)
            assert [e.get("inc") for e in history.since(0) if e.get("type") == "escalate"] == ["w1"]
        finally:
            launcher.close()
