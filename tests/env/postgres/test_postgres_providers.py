"""Every owned provider keeps the same promises: start, crash, restart on the same port with committed
rows intact, and nothing left behind. Providers this machine lacks are skipped with the reason."""

from __future__ import annotations

import os

import psycopg
import pytest

from killpoint.env.postgres import auto, provide
from killpoint.env.postgres.reaper import own_clusters


def reason_missing(kind: str) -> str | None:
    return auto.PROBES[kind]()


@pytest.mark.parametrize(
    "kind",
    [
        pytest.param("local"),
        pytest.param("embedded"),
        pytest.param("docker", marks=pytest.mark.docker),
    ],
)
@pytest.mark.parametrize("hard", [False, True], ids=["sigquit", "sigkill"])
def test_owned_provider_crash_restart(kind: str, hard: bool) -> None:
    why = reason_missing(kind)
    if why:
        pytest.skip(f"{kind} not available: {why}")
    before = own_clusters()
    with provide(kind) as pg:
        assert pg.kind == kind and pg.owned
        folder = pg.dir
        port = pg.port
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            conn.execute("create table t (x int)")
            conn.execute("insert into t values (7)")
        pg.crash(hard=hard)
        pg.restart()
        assert pg.port == port
        with psycopg.connect(pg.dsn) as conn:
            assert conn.execute("select x from t").fetchall() == [(7,)]
    assert not os.path.exists(folder)
    assert own_clusters() == before


def test_embedded_as_root_runs_as_unprivileged_user() -> None:
    why = reason_missing("embedded")
    if why:
        pytest.skip(f"embedded not available: {why}")
    if os.geteuid() != 0:
        pytest.skip("only meaningful as root")
    import psutil

    with provide("embedded") as pg:
        assert psutil.Process(pg.proc.pid).username() != "root"
        assert "site-packages" not in pg.bins.bindir.as_posix()  # a copy the server user can reach
