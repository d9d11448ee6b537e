"""The fork server's protocol has a descriptor of its own (issue 29 item 3): a step module that prints to
stdout at import (`print()`, `logging.basicConfig(stream=sys.stdout)`) runs as under `--spawn exec`."""

from __future__ import annotations

import pytest

from tests.helpers.sandbox import Sandbox

AGENT = '''
import logging, sys
from killpoint.reference_agent.invoice_agent import MIGRATIONS, OWN_EFFECTS_SQL, START, STATE_VERSION, STEPS, initial_state

{chatter}
'''

CHATTER = {
    "print": r"""print("hello from the agent's import")
print('{"op": "spawned", "pid": 1}')""",
    "logging": r"""logging.basicConfig(stream=sys.stdout, level=logging.INFO)
logging.getLogger("agent").info("imported")""",
}


@pytest.mark.parametrize("how", sorted(CHATTER))
def test_a_module_that_prints_at_import_runs(sandbox: Sandbox, how: str) -> None:
    (sandbox.cwd / "chatty_agent.py").write_text(AGENT.format(chatter=CHATTER[how]))
    done = sandbox.run("replay", "--scenario", "crash-points", "--schedule", "email:effect.applied:kill",
                       "--steps", "chatty_agent", "--postgres", "local", "--out", str(sandbox.out))
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    assert "Traceback" not in done.stderr and "PASS" in done.stdout, done.stdout[-2000:]


IMPORT_OUTPUT = '''
import sys, warnings
from killpoint.reference_agent.invoice_agent import MIGRATIONS, OWN_EFFECTS_SQL, START, STATE_VERSION, STEPS, initial_state

print("chatty: configured from defaults")
print("chatty: to stderr", file=sys.stderr)
warnings.warn("chatty's old option is deprecated", UserWarning)
'''


def _import_output(sandbox: Sandbox, spawn: str) -> list[list[str]]:
    out = sandbox.out / spawn
    done = sandbox.run("replay", "--scenario", "crash-points", "--schedule", "email:effect.applied:kill",
                       "--steps", "chatty_import", "--spawn", spawn, "--postgres", "local", "--out", str(out))
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    logs = sorted(out.glob("*/crash-points-1-*.log"))
    assert len(logs) == 2, logs  # the killed incarnation and its successor
    return [log.read_text().splitlines()[:4] for log in logs]


def test_what_a_module_prints_at_import_heads_every_incarnations_log_forked_as_exec_d(sandbox: Sandbox) -> None:
    """A fresh interpreter prints a step module's import-time output (prints on stdout and stderr, warnings)
    in each incarnation's log, as it imports it; a forked incarnation imported nothing, its server did: the
    server keeps what the import wrote and each forked incarnation writes it at the head of its log. The
    logs' heads are the same either way (before: the forked ones had none of it)."""
    (sandbox.cwd / "chatty_import.py").write_text(IMPORT_OUTPUT)
    forked, exec_d = _import_output(sandbox, "fork"), _import_output(sandbox, "exec")
    assert forked == exec_d, (forked, exec_d)
    assert forked[0][:3] == ["chatty: configured from defaults", "chatty: to stderr",
                             f"{sandbox.cwd / 'chatty_import.py'}:7: UserWarning: chatty's old option is deprecated"]
