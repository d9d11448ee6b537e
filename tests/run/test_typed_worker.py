"""A black-box worker that relies on its annotations being evaluated (tests/gallery/blackbox/typed_effects.py:
each effect checked against dataclasses declared in its `main`, by a decoder following the fields' types)
is forked from preloaded servers and passes, as it does run by `python` itself: the fork server compiles
its script as `python` does, without the server's own `from __future__ import annotations`
(harness/env/pymain.py `script_code`). Before, every forked incarnation crashed at its first effect and the
correct worker FAILed."""

from __future__ import annotations

import shlex
import sys

from tests.helpers import REPO
from tests.helpers.checks import describe
from tests.helpers.sandbox import Sandbox

PY = shlex.quote(sys.executable)
WORKER = REPO / "tests" / "gallery" / "blackbox" / "typed_effects.py"


def test_a_worker_whose_code_needs_its_annotations_evaluated_passes_forked(sandbox: Sandbox,
                                                                           dsn_args: list[str]) -> None:
    done = sandbox.run("replay", "--scenario", "crash-points", "--schedule", "email:effect.applied:kill",
                       "--worker-cmd", f"{PY} {WORKER} {{run_id}}", *dsn_args, "--out", str(sandbox.out),
                       timeout=240)
    assert done.returncode == 0, describe(done)
    assert "worker-cmd: incarnations forked from servers that preloaded" in done.stdout + done.stderr, describe(done)
    assert sandbox.survivors() == [] and sandbox.leftover_dirs() == []
