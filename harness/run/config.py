"""What opens a harness session, as one frozen value: built once from the command line
(`cli.config.invocation`), from pytest's options (`plugin`), or by hand (`run.points`), and opened by
`run.opening.open_session`. Pure: nothing here starts, imports or checks anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from killpoint.run.options import RunOptions

MAX_JOBS = 64
"""The most schedules of a scenario that ever run at once: `-j`'s limit, and the widened default's
(`run.pool.widest`)."""


@dataclass(frozen=True)
class SessionConfig:
    """Everything a session needs before its first trial: the agent, where its run directory goes, the
    database, how workers start, and the knobs every trial of the session shares."""

    steps: str
    """The step module of the agent under test."""
    run_dir: Path
    """The session's run directory (history.jsonl, worker logs); made when the session opens."""
    postgres: str = "auto"
    """The Postgres provider (`env.postgres.KINDS`)."""
    dsn: str | None = None
    allow_any_dsn: bool = False
    spawn: str = "fork"
    """Incarnations from a preloaded fork server (`fork`) or fresh interpreters (`exec`)."""
    worker_cmd: str | None = None
    """A black-box worker's command (`--worker-cmd`), or None: the reference runtime."""
    allow_egress: tuple[str, ...] = ()
    """Hosts a worker may reach besides loopback and the --dsn server (`--allow-egress`; `*`: any)."""
    worker_preload: tuple[str, ...] | None = None
    """A Python `--worker-cmd`'s preload (`--worker-preload`): None chosen from its imports, () none."""
    adapter: str | None = None
    """The adapter that reads a black-box worker's records (`--adapter`), or None: the default."""
    effects: Mapping[str, str] = field(default_factory=dict)
    """`--effect` upstreams, name -> URL."""
    options: RunOptions = field(default_factory=RunOptions)
    """The run options every trial starts from (grace, exit-code convention)."""
    jobs: int = 1
    """Schedules of a scenario that may run at the same time (`-j`); 1 under an adapter that cannot."""
    widen: bool = False
    """Whether more than `jobs` schedules may run at once while the cores idle (`run.pool.WhileIdle`): when
    `-j` was not given, and `jobs` is the cores'."""
    skip_checkers: frozenset[str] = frozenset()
    """Checkers left out of every trial's judgement (`--skip-checker`)."""
    previous_steps: str | None = None
    """The agent's previous code (`--previous-steps MODULE|git:REF`), for the schema scenarios."""
    previous_code: bool = False
    """Whether the session knows the agent's previous code (`env.previous.PreviousCode`: the given
    `previous_steps`, else the last commit that changed the module): the command line's sessions do; a
    pytest session and the points cache do not."""
    run_id_suffix: str = ""
    """Ends every run id (`Session.run_id_suffix`): a pytest-xdist worker's name."""
