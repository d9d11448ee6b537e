"""A suite command's arguments are read once into an `Invocation` whose `SessionConfig` is what the session
opens: the defaults a user gets, and each command's own options (replay has no budget, shard or store
switch, and gets the defaults). Pure: nothing is started."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from killpoint.cli.args import default_jobs
from killpoint.cli.config import invocation
from killpoint.cli.main import parser
from killpoint.errors import UsageError
from killpoint.faults.shard import parse


def test_run_reads_every_option_into_one_frozen_value(tmp_path: Path) -> None:
    args = parser().parse_args(["run", "--scenario", "crash-points", "--seed", "7", "--budget", "3", "--shard", "2/3",
                                "--no-store", "--out", str(tmp_path), "--actions", "kill", "--skip-checker",
                                "no_rewind", "-j", "2", "--grace", "1.5", "--quiet"])
    inv = invocation(args, "run")
    assert (inv.seed, inv.budget, inv.named, inv.actions, inv.shard, inv.store, inv.quiet) == \
        (7, 3.0, ("crash-points",), ("kill",), parse("2/3"), False, True)
    config = inv.session
    assert (config.jobs, config.options.grace, config.options.exit_codes) == (2, 1.5, "killpoint")
    assert config.skip_checkers == frozenset({"no_rewind"}) and config.previous_code
    assert config.run_dir.parent == tmp_path and config.run_dir.name.endswith(f"-run-{os.getpid()}")
    assert not config.run_dir.exists()  # made when the session opens, not when the arguments are read
    with pytest.raises(AttributeError):
        inv.seed = 8  # type: ignore[misc]


def test_replay_gets_the_defaults_of_the_options_it_does_not_have(tmp_path: Path) -> None:
    args = parser().parse_args(["replay", "--scenario", "crash-points", "--seed", "3", "--out", str(tmp_path),
                                "--worker-cmd", "node w.js {run_id}"])
    inv = invocation(args, "replay")
    assert (inv.named, inv.budget, inv.shard, inv.store) == (("crash-points",), 60.0, None, True)
    assert inv.session.jobs == default_jobs()
    assert inv.session.options.exit_codes == "none"  # a black-box worker's exit codes mean nothing by default


def test_a_bad_option_is_refused_when_the_arguments_are_read(tmp_path: Path) -> None:
    args = parser().parse_args(["explore", "--scenario", "crash-points", "--exhaustive", "--out", str(tmp_path),
                                "--adapter", "dbos"])
    with pytest.raises(UsageError) as err:
        invocation(args, "explore")
    assert err.value.code == "adapter-without-worker"
