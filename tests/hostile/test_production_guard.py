"""The production guard matches ``test`` as a word, not a substring (issue 29, item 10).

``prod_latest`` and ``attestation`` contain ``test`` and used to be taken for test databases. The rule: the
name has the word ``test`` or ``tests``, its words split at every non-alphanumeric character, at a case change
and between letters and digits. Refused before any connection is tried (port 1 answers nothing).
"""

from __future__ import annotations

import pytest

from killpoint.env.postgres.dsn import check_safe, is_test_name
from tests.helpers.sandbox import Sandbox

REPLAY = ("replay", "--scenario", "crash-points", "--schedule", "email:effect.applied:kill")
NOT_TEST = ["prod_latest", "attestation", "contest", "latest", "testament", "protest", "testdb", "mytest",
            "Attestations", "greatest_hits", "testing"]
TEST = ["test", "tests", "app_test", "test_app", "app-test", "app.test", "AppTest", "test2", "app_test_3",
        "TEST", "x_tests", "test_killpoint_s_0123456789ab", "killpoint_doctor_test"]


@pytest.mark.parametrize("name", NOT_TEST)
def test_a_name_with_test_only_inside_a_word_is_refused(sandbox: Sandbox, name: str) -> None:
    proc = sandbox.run(*REPLAY, "--dsn", f"postgresql://u@127.0.0.1:1/{name}", "--out", str(sandbox.out))
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip()
    assert line.startswith("killpoint: error[dsn-not-test]: ") and len(line.splitlines()) == 1, line
    assert repr(name) in line and "as a word of its own" in line and "--allow-any-dsn" in line, line


@pytest.mark.parametrize("name", TEST)
def test_a_name_with_the_word_test_passes_the_guard(name: str) -> None:
    assert is_test_name(name)
    check_safe(f"postgresql://u@127.0.0.1:1/{name}", allow_any_dsn=False)


@pytest.mark.parametrize("name", NOT_TEST)
def test_allow_any_dsn_still_lets_any_name_through(name: str) -> None:
    check_safe(f"postgresql://u@127.0.0.1:1/{name}", allow_any_dsn=True)
