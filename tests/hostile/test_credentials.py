"""No real credential reaches a worker (issue 25 item 2): the shell sets real-looking keys; a step module
writes down what it sees at import (in the fork server, under the default spawn) and at step time; neither
sees a real value, under `--spawn fork` and `--spawn exec`."""

from __future__ import annotations

import json

import pytest

from tests.helpers.sandbox import Sandbox

REAL = {
    "OPENAI_API_KEY": "sk-real-openai", "ANTHROPIC_API_KEY": "sk-ant-real", "RESEND_API_KEY": "re_real",
    "STRIPE_API_KEY": "sk_live_real", "STRIPE_SECRET_KEY": "sk_live_real2", "SENDGRID_API_KEY": "SG.real",
    "POSTMARK_SERVER_TOKEN": "pm-real", "TWILIO_AUTH_TOKEN": "tw-real", "AWS_SECRET_ACCESS_KEY": "aws-real",
    "AWS_SESSION_TOKEN": "aws-session-real", "AWS_ACCESS_KEY_ID": "AKIAREAL", "GEMINI_API_KEY": "gem-real",
    "GOOGLE_APPLICATION_CREDENTIALS": "/home/me/real.json", "HF_TOKEN": "hf_real", "GROQ_API_KEY": "gsk_real",
}

AGENT = '''
import json, os
from killpoint.reference_agent.invoice_agent import MIGRATIONS, OWN_EFFECTS_SQL, START, STATE_VERSION, initial_state
from killpoint.reference_agent.invoice_agent import STEPS as _STEPS

NAMES = {names!r}


def _write(where):
    with open({out!r}, "a") as f:
        f.write(json.dumps({{"where": where, "pid": os.getpid(),
                             "env": {{k: os.environ.get(k) for k in NAMES}},
                             "base": os.environ.get("OPENAI_BASE_URL")}}) + "\\n")


_write("import")


def plan(cp, ctx):
    _write("step")
    return _STEPS["plan"](cp, ctx)


STEPS = {{**_STEPS, "plan": plan}}
'''


@pytest.mark.parametrize("spawn", ["fork", "exec"])
def test_no_worker_sees_the_shells_real_keys(sandbox: Sandbox, spawn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = sandbox.root / "seen.jsonl"
    (sandbox.cwd / "creds_agent.py").write_text(AGENT.format(names=sorted(REAL), out=str(seen)))
    for name, value in REAL.items():
        monkeypatch.setenv(name, value)
    done = sandbox.run("replay", "--scenario", "crash-points", "--steps", "creds_agent", "--schedule", "email:effect.applied:kill",
                       "--spawn", spawn, "--postgres", "local", "--out", str(sandbox.out))
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    records = [json.loads(line) for line in seen.read_text().splitlines()]
    wheres = {r["where"] for r in records}
    assert wheres == {"import", "step"}, records
    if spawn == "fork":  # the fork server's import, pointed at the fakes
        assert any(r["where"] == "import" and r["base"] for r in records), records
    for r in records:
        leaked = {k: v for k, v in r["env"].items() if v == REAL[k]}
        assert not leaked, (r["where"], leaked)
        assert r["env"]["OPENAI_API_KEY"] == "sk-killpoint"
        # the harness's own import (checking the module) has no fakes yet: no base URL, and the guard
        if r["where"] == "step" or r["base"] is not None:
            assert r["base"].startswith("http://127.0.0.1:"), r
