"""``docker``: Postgres in a container (testcontainers, pinned image), bound to 127.0.0.1 on a free port.

Docker is detected by ``DOCKER_HOST`` or a socket file, and counts only if the engine answers a ping: the
``docker`` client alone proves nothing. The container id is recorded in the owned cluster folder so a
later start reaps it if this process dies (testcontainers' Ryuk does the same when it runs). The container
carries killpoint's labels (``reaper.container_labels``: ``killpoint=postgres``, ``killpoint.session=<pid>-<ctime>``
of this process, ``killpoint.cluster=<folder name>``): the reaper removes a recorded container only if the
engine reports exactly these on it.
``crash()`` sends SIGQUIT (``hard=True``: SIGKILL) to the container's postmaster (PID 1), which stops the
container; ``restart()`` starts the same container again: same data, same host port.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from killpoint.env.postgres.capacity import DEFAULT_SERVER
from killpoint.env.postgres.handle import PostgresHandle
from killpoint.env.postgres.local import MAIN_DB, PORT_ATTEMPTS, free_port
from killpoint.env.postgres.reaper import CONTAINER_FILE, container_labels, destroy, new_cluster_dir
from killpoint.env.postgres.wait import Wait
from killpoint.errors import EnvironmentProblem

DEFAULT_IMAGE = "postgres:16.4-alpine"


def image() -> str:
    """The image to start: `KILLPOINT_POSTGRES_IMAGE`, else `DEFAULT_IMAGE` (read when asked, not at import)."""
    return os.environ.get("KILLPOINT_POSTGRES_IMAGE", DEFAULT_IMAGE)
SOCKETS = ("/var/run/docker.sock", str(Path.home() / ".docker/run/docker.sock"))
START_TIMEOUT = 120.0


def probe() -> str | None:
    """``None`` if a Docker engine answers; otherwise why not (one clause, for messages)."""
    host = os.environ.get("DOCKER_HOST")
    if not host:
        sock = next((s for s in SOCKETS if Path(s).exists()), None)
        if sock is None:
            return "no Docker engine: DOCKER_HOST is unset and no socket at /var/run/docker.sock"
        host = f"unix://{sock}"
    try:
        import docker  # noqa: PLC0415

        # from_env honours DOCKER_HOST's TLS settings; a bare socket needs its URL
        client = (
            docker.from_env(timeout=5)
            if os.environ.get("DOCKER_HOST")
            else docker.DockerClient(host, timeout=5)
        )
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:  # noqa: BLE001 - any failure means "not usable"
        return f"the Docker engine at {host} does not answer ({type(exc).__name__})"
    return None


def _can_connect(dsn: str) -> bool | None:
    import psycopg  # noqa: PLC0415

    try:
        with psycopg.connect(dsn, connect_timeout=2):
            return True
    except psycopg.OperationalError:
        return None


class DockerServer(PostgresHandle):
    """A Postgres container this process started. Build with ``DockerServer.start()``."""

    kind = "docker"
    owned = True

    def __init__(self) -> None:
        self.dir: Path | None = None
        self.port: int | None = None
        self.container: Any = None
        self._dsn: str | None = None

    @classmethod
    def start(cls, connections: int = DEFAULT_SERVER) -> DockerServer:
        server = cls()
        server.connections = connections
        try:
            server._boot()
        except BaseException:
            server.close()
            raise
        return server

    def _boot(self) -> None:
        self.dir = new_cluster_dir(self.kind)
        tried: list[int] = []
        for _ in range(PORT_ATTEMPTS):
            port = free_port()
            tried.append(port)
            try:
                self.container = self._run_container(port, container_labels(self.dir), self.connections)
            except Exception as exc:  # noqa: BLE001 - port race (retry) or engine failure (report)
                text = str(exc).lower()
                if "address already in use" in text or "port is already allocated" in text:
                    continue
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
                raise EnvironmentProblem(
                    "docker-start-failed",
                    f"could not start {image()} in Docker: {first}",
                    f"check that `docker run --rm {image()} postgres --version` works (pulling needs network), "
                    "or use --postgres local",
                ) from None
            self.port = port
            (self.dir / CONTAINER_FILE).write_text(self.container.get_container_id())
            break
        else:
            raise EnvironmentProblem(
                "port-unavailable",
                f"every port tried for the Docker Postgres was taken ({', '.join(map(str, tried))})",
                "free some local ports, then run again",
            )
        self._wait_ready()
        self._dsn = self.create_database(MAIN_DB)

    @property
    def admin_dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    @property
    def dsn(self) -> str:
        if self._dsn is None:
            raise EnvironmentProblem("not-started", "the docker server is not started", "use provide()")
        return self._dsn

    @staticmethod
    def _run_container(port: int, labels: dict[str, str], connections: int = DEFAULT_SERVER) -> Any:
        """Create and start the container, labelled ``labels``, bound to 127.0.0.1:``port``, with room for
        ``connections``; remove it again if that fails."""
        from testcontainers.community.postgres import PostgresContainer  # noqa: PLC0415

        pc = PostgresContainer(
            image(), username="postgres", password="postgres", dbname="postgres", driver=None
        )
        pc.with_env("POSTGRES_HOST_AUTH_METHOD", "trust")
        pc.with_command("postgres -c fsync=off -c full_page_writes=off -c synchronous_commit=on "
                        f"-c max_connections={connections}")
        pc.ports["5432"] = ("127.0.0.1", port)  # replaces the random 0.0.0.0 binding PostgresContainer set
        # testcontainers adds its own org.testcontainers.* labels to these when it creates the container
        pc.with_kwargs(**{**getattr(pc, "_kwargs", {}), "labels": dict(labels)})
        try:
            pc.start()
        except BaseException:
            try:
                pc.stop()
            except Exception:  # noqa: BLE001 - never created, or already gone
                pass
            raise
        return pc

    def _wait_ready(self) -> None:
        Wait(
            f"the Postgres container on port {self.port} to accept connections",
            START_TIMEOUT,
            None,
            "run `docker logs` on the container",
            "server-not-ready",
        ).until(lambda: _can_connect(self.admin_dsn))

    def crash(self, hard: bool = False) -> None:
        """SIGQUIT (immediate shutdown) or SIGKILL to PID 1 (the postmaster); the container stops."""
        wrapped = self.container.get_wrapped_container()
        wrapped.kill(signal="SIGKILL" if hard else "SIGQUIT")
        wrapped.wait(timeout=60)

    def restart(self) -> None:
        """Start the same container (same data and host port) and wait until it accepts connections."""
        wrapped = self.container.get_wrapped_container()
        wrapped.reload()
        if wrapped.status == "running":
            wrapped.stop(timeout=10)
        wrapped.start()
        self._wait_ready()

    def close(self) -> None:
        try:
            if self.container is not None:
                self.container.stop()
        except Exception:  # noqa: BLE001 - already gone; destroy() below retries by id
            pass
        finally:
            self.container = None
            if self.dir is not None:
                destroy(self.dir)
