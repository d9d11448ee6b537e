"""A user's project in a real git checkout, for the tests of `--previous-steps git:REF`: a small step module
(`parcel.steps`: pack -> notify -> book, one mail and one row of its own table, no model call) committed in
versions, as a user would."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

MODULE = "parcel.steps"
FILE = "parcel/steps.py"

V1 = '''"""A parcel agent: pack -> notify -> book -> done (no model call)."""

from killpoint.reference_agent import StepResult

START = "pack"
STATE_VERSION = 1
SCHEMA_SQL = "CREATE TABLE IF NOT EXISTS parcel_book (run_id text PRIMARY KEY, recipient text NOT NULL)"
OWN_EFFECTS_SQL = "SELECT recipient FROM parcel_book WHERE run_id = %s"


def initial_state(params):
    return {"recipient": "sam@example.com", "packed": False, "mail_id": None}


def pack(cp, ctx):
    return StepResult("notify", {"packed": True})


def notify(cp, ctx):
    receipt = ctx.mailer.send(cp.state["recipient"], "parcel-packed", {"packed": cp.state["packed"]},
                              key=ctx.idempotency_key)
    return StepResult("book", {"mail_id": receipt.get("id")})


def book(cp, ctx):
    def insert(cur):
        cur.execute("INSERT INTO parcel_book (run_id, recipient) VALUES (%s, %s)", (cp.run_id, cp.state["recipient"]))
    return StepResult("done", {}, in_txn=insert)


STEPS = {"pack": pack, "notify": notify, "book": book}
'''
"""Version 1: the recipient is `state["recipient"]`."""

RENAMED = V1.replace('"recipient": "sam@example.com"', '"to": "sam@example.com"').replace(
    'cp.state["recipient"]', 'cp.state["to"]')
"""The field renamed to `to`, without a STATE_VERSION bump: version-1 checkpoints no longer resume."""

V2 = RENAMED.replace("STATE_VERSION = 1\n", '''STATE_VERSION = 2


def _v1_to_v2(state):
    state = dict(state)
    state["to"] = state.pop("recipient")
    return state


MIGRATIONS = {1: _v1_to_v2}
''')
"""The same rename done right: STATE_VERSION 2 and a migration from 1."""


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env, timeout=30).stdout.strip()


def project(repo: Path, *versions: str) -> list[str]:
    """`repo` as a git checkout: a first commit without the step module, then one commit per version of
    `parcel/steps.py`; the commit ids, oldest first (the README's first)."""
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q")
    (repo / "README.md").write_text("parcels\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "readme")
    commits = [git(repo, "rev-parse", "HEAD")]
    (repo / "parcel").mkdir(exist_ok=True)
    (repo / "parcel" / "__init__.py").write_text("")
    for i, source in enumerate(versions, 1):
        (repo / FILE).write_text(source)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"version {i}")
        commits.append(git(repo, "rev-parse", "HEAD"))
    return commits
