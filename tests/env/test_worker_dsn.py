"""killpoint's session settings are merged into the options of a `--dsn`, not lost to them (libpq takes
`options` from the DSN, else PGOPTIONS, never both; `application_name` from the DSN, else PGAPPNAME):
harness/env/postgres/conninfo.py."""

from __future__ import annotations

import json
import re
import shlex
import sys
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from psycopg.conninfo import conninfo_to_dict

from killpoint.env.postgres import PostgresHandle, conninfo, session_schema
from tests.helpers import REPO
from tests.helpers.sandbox import Sandbox

WORKER = REPO / "tests" / "helpers" / "skiplocked_worker.py"


def test_the_users_options_are_kept_and_killpoints_settings_are_added() -> None:
    user = "postgresql://u@h:5/app_test?options=" + quote("-c search_path=foo -c statement_timeout=1234 -B 8")
    scoped = session_schema.scoped(user, "killpoint_s_0123456789ab")
    assert conninfo_to_dict(scoped)["options"] == \
        "-c statement_timeout=1234 -B 8 -c search_path=killpoint_s_0123456789ab"  # the user's path replaced
    worker = conninfo_to_dict(conninfo.for_worker(scoped, "r-1#2"))
    assert worker["options"].endswith("-c search_path=killpoint_s_0123456789ab -c killpoint.inc=r-1#2")
    assert "application_name" not in worker  # PGAPPNAME still reaches the session


def test_key_value_dsns_and_spaces_in_values_are_handled() -> None:
    scoped = session_schema.scoped("host=h dbname=t_test options='-cstatement_timeout=5s'", "s1")
    worker = conninfo_to_dict(conninfo.for_worker(scoped + " application_name=mine", "a b"))
    assert worker["options"] == r"-c statement_timeout=5s -c search_path=s1 -c killpoint.inc=a\ b"
    assert worker["application_name"] == "a b"  # the DSN's name would hide the incarnation's


def test_a_dsn_without_options_or_name_is_left_to_the_environment() -> None:
    assert conninfo.for_worker("postgresql://u@h/db_test", "r-1#1") == "postgresql://u@h/db_test"


@pytest.fixture
def user_dsn(pg_server: PostgresHandle) -> Iterator[str]:
    """A fresh database on the session's Postgres, named by a DSN that carries options and a name."""
    dsn = pg_server.create_database("wdsn_options")
    yield dsn + "?application_name=userapp&options=" + quote("-c statement_timeout=4321 -c search_path=foo")
    pg_server.drop_database("wdsn_options")


def test_a_worker_on_a_dsn_with_options_gets_the_users_settings_and_killpoints(
        sandbox: Sandbox, user_dsn: str) -> None:
    probe = sandbox.root / "probe.jsonl"
    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(WORKER))} {{run_id}} --probe {shlex.quote(str(probe))}"
    done = sandbox.run("replay", "--scenario", "zombie-worker", "--schedule", "email:checkpoint.writing:stop",
                       "--worker-cmd", cmd, "--dsn", user_dsn, "--allow-any-dsn", "--out", str(sandbox.out),
                       timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^PASS\s+zombie-worker\s", done.stdout, re.MULTILINE), done.stdout
    seen = [json.loads(line) for line in probe.read_text().splitlines()]
    assert len(seen) >= 3, seen  # two crash-free runs, the zombie and its successor
    for s in seen:
        assert re.fullmatch(r"killpoint_s_[0-9a-f]{12}", s["search_path"]), s  # never the user's: no fall-through
        assert s["statement_timeout"] == "4321ms", s
        assert s["application_name"] == s["killpoint_inc"], s
        assert re.fullmatch(r".+#\d+", s["killpoint_inc"]), s
    assert len({s["killpoint_inc"] for s in seen}) == len(seen), seen
    assert not sandbox.survivors(), sandbox.survivors()
