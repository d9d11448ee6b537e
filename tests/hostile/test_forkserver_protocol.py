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
