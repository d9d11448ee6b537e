"""Choosing a provider, the DSN safety refusal, and the bad-input errors (one line, exit 2, nothing left)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from killpoint.env.postgres import auto, docker, open_server, provide
from killpoint.env.postgres.binaries import find_local
from killpoint.env.postgres.dsn import DsnServer, check_safe
from killpoint.env.postgres.local import PORT_ATTEMPTS, LocalServer, free_port
from killpoint.env.postgres.reaper import own_clusters
from killpoint.errors import EnvironmentProblem, UsageError

needs_local = pytest.mark.skipif(find_local() is None, reason="no Postgres server binaries on this machine")


@pytest.fixture
def no_docker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A machine where the docker client may exist but no engine does: no DOCKER_HOST, no socket."""
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(docker, "SOCKETS", (str(tmp_path / "docker.sock"),))


def test_docker_probe_without_engine(no_docker: None) -> None:
    assert "no Docker engine" in (docker.probe() or "")


def test_docker_probe_with_dead_docker_host(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/nothing.sock")
    assert "does not answer" in (docker.probe() or "")


@needs_local
def test_auto_passes_over_docker_and_picks_local(no_docker: None) -> None:
    said: list[str] = []
    with provide("auto", on_choice=said.append) as pg:
        assert pg.kind == "local" and pg.owned
    assert len(said) == 1
    assert "auto chose local" in said[0] and "passed over docker: no Docker engine" in said[0]


def test_auto_order_prefers_docker_when_it_works(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[str] = []

    def fake_start(kind: str, connections: int):  # noqa: ANN202
        started.append(kind)
        assert connections == 300  # every candidate is asked for the room the session needs
        raise EnvironmentProblem("x", f"{kind} broke", "nothing")

    monkeypatch.setattr(auto, "start_kind", fake_start)
    with pytest.raises(EnvironmentProblem) as info:
        auto.open_server("auto", connections=300)
    assert started == ["docker", "local", "embedded"]
    assert info.value.code == "no-postgres"


def test_no_postgres_anywhere_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auto, "PROBES", {k: (lambda k=k: f"no {k} here") for k in auto.AUTO_ORDER})
    before = own_clusters()
    with pytest.raises(EnvironmentProblem) as info:
        open_server("auto")
    line = info.value.line()
    assert "\n" not in line and line.startswith("killpoint: error[no-postgres]: ")
    assert "no docker here" in line and "no local here" in line and "no embedded here" in line
    assert "Fix: install Postgres" in line
    assert own_clusters() == before


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://u@localhost/production",
        "host=db dbname=orders user=app",
        "postgresql://u@localhost:5432/",
    ],
)
def test_dsn_without_test_in_name_is_refused(dsn: str) -> None:
    with pytest.raises(UsageError) as info:
        check_safe(dsn, allow_any_dsn=False)
    assert info.value.code == "dsn-not-test"
    assert "does not have the word 'test'" in info.value.line() and "--allow-any-dsn" in info.value.line()


def test_dsn_refusal_happens_before_connecting() -> None:
    with pytest.raises(UsageError):
        open_server("dsn", dsn="postgresql://u@127.0.0.1:1/prod")


def test_allow_any_dsn_lifts_the_refusal() -> None:
    check_safe("postgresql://u@localhost/production", allow_any_dsn=True)
    check_safe("postgresql://u@localhost/my_test_db", allow_any_dsn=False)


def test_dsn_that_refuses_connections() -> None:
    port = free_port()  # nothing listens there
    with pytest.raises(EnvironmentProblem) as info:
        DsnServer.open(f"postgresql://postgres@127.0.0.1:{port}/killpoint_test")
    assert info.value.code == "dsn-refused"
    assert "\n" not in info.value.line() and "Fix: start that server" in info.value.line()


@needs_local
def test_dsn_provider_uses_but_never_owns(pg_server) -> None:  # noqa: ANN001
    user_dsn = pg_server.create_database("user_test_db")
    with provide("auto", dsn=user_dsn) as pg:
        assert pg.kind == "dsn" and not pg.owned and pg.admin_dsn == user_dsn
        assert pg.dsn.startswith(user_dsn) and "search_path" in pg.dsn  # a schema of the session's own
        with pytest.raises(UsageError):
            pg.crash()
        made = pg.create_database("scratch")
        assert "test" in made.rsplit("/", 1)[1]
        pg.drop_database("scratch")
    import psycopg

    with psycopg.connect(user_dsn) as conn:  # the user's database is still there
        assert conn.execute("select 1").fetchone() == (1,)


@needs_local
def test_port_taken_between_choosing_and_binding_is_retried() -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        ports = iter([taken, taken])
        server = LocalServer.start(find_local(), port_chooser=lambda: next(ports, None) or free_port())
        try:
            assert server.port != taken and server.running
        finally:
            server.close()


@needs_local
def test_port_always_taken_fails_clearly_and_leaves_nothing() -> None:
    before = own_clusters()
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        with pytest.raises(EnvironmentProblem) as info:
            LocalServer.start(find_local(), port_chooser=lambda: taken)
    assert info.value.code == "port-unavailable"
    assert (
        str(taken) in info.value.message
        and f"({', '.join([str(taken)] * PORT_ATTEMPTS)})" in info.value.message
    )
    assert own_clusters() == before


def test_docker_engine_vanishing_before_start_is_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/gone.sock")
    before = own_clusters()
    with pytest.raises(EnvironmentProblem) as info:
        docker.DockerServer.start()
    assert info.value.code == "docker-start-failed" and "\n" not in info.value.line()
    assert own_clusters() == before


@needs_local
def test_dsn_user_without_createdb_gets_one_line() -> None:
    import psycopg

    with provide("local") as pg:
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            conn.execute("CREATE ROLE weak LOGIN")
            # a schema of its own is all a DSN user needs (killpoint never writes among the user's tables)
            conn.execute(f'GRANT CREATE ON DATABASE "{conn.info.dbname}" TO weak')
        weak = DsnServer.open(pg.dsn.replace("postgres@", "weak@"), allow_any_dsn=True)
        with pytest.raises(EnvironmentProblem) as info:
            weak.create_database("scratch")
        assert info.value.code == "createdb-denied" and "CREATEDB" in info.value.fix


def test_dsn_with_an_owned_kind_is_a_usage_error() -> None:
    with pytest.raises(UsageError) as info:
        open_server("local", dsn="postgresql://u@localhost/x_test")
    assert info.value.code == "dsn-with-owned-kind"
