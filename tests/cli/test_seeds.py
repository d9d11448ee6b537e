"""Base seeds like Hypothesis's: random by default and printed at the start, fixed by --seed."""

from __future__ import annotations

import re

import pytest

from killpoint.cli.commands import base_seed
from killpoint.cli.main import parser


@pytest.mark.parametrize("argv", [["run"], ["explore", "--scenario", "crash-points", "--random", "2"]])
def test_without_seed_each_run_draws_its_own_and_prints_it(argv: list[str], capsys: pytest.CaptureFixture) -> None:
    seeds = []
    for _ in range(2):
        args = parser().parse_args(argv)
        assert args.seed is None
        base_seed(args)
        out = capsys.readouterr().out
        assert re.fullmatch(rf"base seed {args.seed} \(random; repeat this run with --seed {args.seed}\)\n", out), out
        seeds.append(args.seed)
    assert seeds[0] != seeds[1]  # CI tries other random schedules each time (a collision is 1 in 2**32)


def test_seed_fixes_it(capsys: pytest.CaptureFixture) -> None:
    args = parser().parse_args(["run", "--seed", "7"])
    base_seed(args)
    assert args.seed == 7
    assert "base seed 7 (fixed by --seed; repeat this run with --seed 7)" in capsys.readouterr().out
