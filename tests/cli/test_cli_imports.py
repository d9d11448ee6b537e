"""The command line imports nothing heavy before it needs it: `killpoint scenarios`, `--help` and a usage
error answer without importing anthropic (~1.2 s) or psycopg (~0.4 s). Asserted on `sys.modules` in a
fresh interpreter, not timed."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("anthropic", "psycopg", "httpx", "killpoint.env.environment", "killpoint.run.controller")
SUITE = ("killpoint.cli.commands", "killpoint.run.scenario", "killpoint.fake_services", "rich")
"""What only a command that runs the suite needs (its runner, the fakes, the console): ~300 ms of imports
that `killpoint scenarios` and `--help` paid before the parsers were built apart (killpoint.cli.parsers)."""

PROBE = """
import contextlib, io, sys
from killpoint.cli.main import main
out = io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
    try:
        code = main({argv!r})
    except SystemExit as exc:
        code = exc.code
print(repr(code))
print(out.getvalue().count("\\n"))
print(",".join(m for m in {heavy!r} if m in sys.modules))
"""


def probe(argv: list[str], heavy: tuple[str, ...] = HEAVY) -> tuple[str, int, list[str]]:
    """(exit code, lines printed, which of `heavy` were imported) of `main(argv)` in a fresh interpreter."""
    proc = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv, heavy=heavy)],
                          capture_output=True, text=True, timeout=120, check=True)
    code, lines, heavy = proc.stdout.splitlines()[-3:]
    return code, int(lines), [m for m in heavy.split(",") if m]


def test_listing_scenarios_imports_nothing_heavy() -> None:
    code, lines, heavy = probe(["scenarios"])
    assert code == "0" and lines >= 10  # every registered scenario, a line each
    assert heavy == []


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"], ["run", "--scenario", "no-such-scenario"],
                                  ["explore", "--scenario", "crash-points", "--exhaustive", "-j", "0"]])
def test_help_and_usage_errors_import_nothing_heavy(argv: list[str]) -> None:
    code, _lines, heavy = probe(argv)
    assert code in ("0", "2")
    assert heavy == []


def test_the_catalog_agrees_with_the_imported_registry() -> None:
    """Names and summaries read from the source are those the imported scenarios give."""
    from killpoint.run.catalog import entries
    from killpoint.run.scenario import registry

    assert {n: e.summary for n, e in entries().items()} == {n: s.summary for n, s in registry().items()}


@pytest.mark.parametrize("argv", [["scenarios"], ["--help"], ["run", "--help"], ["record", "--help"],
                                  ["merge", "--help"]])
def test_listing_and_help_do_not_import_the_suite(argv: list[str]) -> None:
    code, _lines, imported = probe(argv, SUITE)
    assert code == "0"
    assert imported == []


@pytest.mark.parametrize("argv", [["run", "--scenario", "no-such-scenario"], ["run", "--skip-scenario", "nope"],
                                  ["replay", "--scenario", "nope", "--seed", "1"],
                                  ["explore", "--scenario", "nope", "--random", "3"]])
def test_a_misspelt_scenario_is_refused_before_the_suite_is_imported(argv: list[str]) -> None:
    """Checked against the catalog while the line is parsed (`run.catalog.known`): exit 2, no runner."""
    code, _lines, imported = probe(argv, SUITE)
    assert code == "2"
    assert imported == []
