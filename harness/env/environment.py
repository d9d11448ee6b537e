"""The environment of a harness session: Postgres, the fake services, the kill-point socket and the
launcher, started together and torn down together, whatever happens.

Every resource is entered on one ExitStack, so a failure while starting the third one still stops the
first two, and Ctrl-C or an exception in a run tears everything down in reverse order.
"""

from __future__ import annotations

import contextlib
import os
import select
import shlex
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import psycopg

from killpoint.adapters import Adapter, CheckpointsAdapter, table_exists
from killpoint.env import audit, egress_shim, pycommand, pyfork_launcher, sqlbarrier, stepmodule
from killpoint.env.barrier import BarrierServer
from killpoint.env.exec_launcher import ExecLauncher
from killpoint.env.fakes_env import import_env
from killpoint.env.fork_launcher import ForkLauncher
from killpoint.env.launcher import Incarnation, Launcher
from killpoint.env.listener import RunListener
from killpoint.env.postgres import capacity, provide
from killpoint.env.postgres.reaper import destroy, new_cluster_dir
from killpoint.env.pycommand import PythonCommand
from killpoint.env.pyfork_launcher import PythonForkLauncher
from killpoint.env.stepmodule import Prober
from killpoint.errors import UsageError
from killpoint.fake_services import Services
from killpoint.fake_services.cassette import PATH_VAR as CASSETTE_VAR
from killpoint.fake_services.cassette import CassetteError
from killpoint.fake_services.hooks import Decision
from killpoint.fake_services.script import Script, ScriptError, from_environment, load_script

T = TypeVar("T")


class Environment:
    """Owned resources of one harness session. Use as a context manager.

    `spawn` is "fork" (a fork server preloading `preload`), "exec" (fresh interpreters) or a
    `worker_cmd` argv template for black-box workers. `effects` (name -> URL) are the HTTP services put
    behind a recording proxy (`--effect`): their requests are recorded and held like the fakes'.
    `adapter` says where a black-box worker's runtime keeps a run's progress (killpoint/adapters; default
    the seeds' `checkpoints` table). With an adapter whose table the user's framework creates, killpoint
    creates nothing of the seeds' shape, installs the barrier trigger on that table once it exists (at
    the first run attached after the crash-free run made it), and removes it when the session ends.
    """

    def __init__(self, *, postgres: str = "auto", dsn: str | None = None, allow_any_dsn: bool = False,
                 spawn: str = "fork", worker_cmd: str | None = None, preload: list[str] | None = None,
                 run_dir: Path, say: Callable[[str], None] | None = None, schema: Callable | None = None,
                 effects: Mapping[str, str] | None = None, adapter: Adapter | None = None,
                 model_script: object = None, allow_egress: tuple[str, ...] = (),
                 worker_preload: tuple[str, ...] | None = None, connections: int | None = None,
                 meanwhile: Callable[[Prober | None], object] | None = None) -> None:
        self._postgres, self._dsn, self._allow_any_dsn = postgres, dsn, allow_any_dsn
        self._spawn, self._worker_cmd, self._preload = spawn, worker_cmd, preload or []
        self._worker_preload = worker_preload
        self._connections = connections  # an owned server's max_connections (None: Postgres's default)
        """`--worker-preload`: a black-box Python worker's preload (None: chosen, `pycommand.auto_preload`;
        (): no forking)."""
        self.run_dir = run_dir
        self._say = say
        self._schema = schema
        self.effects: dict[str, str] = dict(effects or {})
        """`--effect` upstreams (name -> URL), each behind a recording proxy of the fake services."""
        self._model_script = model_script
        """How the model fakes answer (a step module's `MODEL_SCRIPT`, docs/tools.md); None: the script
        `KILLPOINT_MODEL_SCRIPT` names, else the default policy."""
        self._meanwhile = meanwhile
        """Work done while the fork servers import `preload`, before Postgres starts (`run.opening`: the step
        module's load, so that the two overlap); it is given `ForkLauncher.probe` as its `stepmodule.Prober`
        (the first server's own import checks a user's module, else a child of its own does), or None without
        fork servers, and returns the model script (as `model_script`, which it replaces). What it raises
        stops everything started so far, as any failure to start does."""
        self.allow_egress = tuple(allow_egress)
        """`--allow-egress`: the hosts a worker may reach that the user named (a replay line repeats them)."""
        self.egress_allowed = egress_hosts(dsn, allow_egress)
        """What a Python worker may reach besides loopback (`egress.ALLOW_VAR`'s value; `*`: anything)."""
        self._stack = contextlib.ExitStack()
        self._listeners: dict[str, RunListener] = {}
        self._sqlbarriers: dict[str, sqlbarrier.SqlBarrier] = {}
        self.adapter: Adapter = adapter or CheckpointsAdapter()
        self._held_table = False
        self._lock = threading.Lock()
        self._hold_lock = threading.Lock()
        self._idle: list[psycopg.Connection] = []  # `pooled` connections not in use

    def __enter__(self) -> Environment:
        try:
            self._start()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _start(self) -> None:
        stack = self._stack
        # Named after this process, among the Postgres clusters: if the harness is SIGKILLed, the reaper of
        # the next start (provide() below, or any later run) removes it as it removes a dead owner's cluster.
        tmp = new_cluster_dir("env")
        stack.callback(destroy, tmp)
        self.socket_path = tmp / "kp.sock"
        later = self._meanwhile is not None  # the script comes from `meanwhile`: the default policy until then
        self.services = self._script_said(lambda: Services.start(hook=self._service_hook, upstreams=self.effects,
                                                                 script=Script() if later else self._model_script))
        stack.callback(self.services.stop)
        # The fork servers import the agent (about a second) while the step module loads and Postgres starts,
        # under the environment their incarnations get (no real credential, the SDKs pointed at the fakes);
        # `ready` below waits. Both at once: starting the second only once the first is ready starts the
        # first trial ~0.6 s sooner but ends a replay ~2 s later (its resumed incarnation waits for that
        # import; bench/startup.py).
        # Where the step module is a user's, the first server's import of it is also its check (`meanwhile`'s
        # load is given `forks.probe`): one import of it fewer than with a probe child of its own.
        probing = self._meanwhile is not None and bool(self._preload) and not stepmodule.ours(self._preload[0])
        forks = None if self._worker_cmd or self._spawn == "exec" else \
            ForkLauncher(self._preload, env=import_env(self.services, self.egress_allowed), wait=False, probe=probing)
        if forks is not None:
            stack.callback(forks.close)  # if the start fails before the launcher's own close is registered
        pycmd = self._python_command()
        pyforks = self._python_forks(pycmd)
        if pyforks is not None:
            stack.callback(pyforks.close)
        if self._meanwhile is not None:
            source = self._meanwhile(forks.probe if forks is not None else None)
            self.services.state.script = self._script_said(
                lambda: from_environment() if source is None else load_script(source))
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.pg = stack.enter_context(provide(kind=self._postgres, dsn=self._dsn, allow_any_dsn=self._allow_any_dsn,
                                              on_choice=self._say,
                                              connections=self._connections or capacity.DEFAULT_SERVER))
        isolate = getattr(self.pg, "isolate", None)  # a --dsn server: DBOS's `dbos` schema goes in a database of its own
        if isolate is not None and getattr(self.adapter, "system_schemas", ()):
            isolate(tuple(self.adapter.system_schemas), self._say)
        stack.callback(self._close_pool)  # before the server stops
        with self.connect() as conn:
            if self.adapter.hold.owned:  # else the user's framework owns its tables: nothing of the seeds' shape
                if self._schema is not None:
                    self._schema(conn)
                audit.install(conn)
                if self._worker_cmd:
                    sqlbarrier.install(conn)  # a black-box worker's checkpoint points are held by a trigger
                    self._held_table = True
            else:
                audit.ensure_table(conn)
        self.barrier = BarrierServer(self.socket_path, self._worker_point, self._worker_note)
        stack.callback(self.barrier.close)
        launcher: Launcher
        if forks is not None:
            forks.ready()
            launcher = forks
        elif pyforks is not None:
            pyforks.ready()
            launcher = pyforks
        elif pycmd is not None:
            launcher = ExecLauncher(pycmd.guarded_argv())  # a Python worker, never forked: still guarded
        elif self._worker_cmd:
            launcher = ExecLauncher.from_shell(self._worker_cmd, self._egress_library())
        else:
            launcher = ExecLauncher()
        launcher.on_start = self._on_start
        launcher.on_exit = self._on_exit
        self.launcher = launcher
        stack.callback(launcher.close)  # first at the end: the workers go before the services and Postgres

    @staticmethod
    def _script_said(make: Callable[[], T]) -> T:
        """`make()`, with a model script or cassette it cannot use said as one UsageError with the fix."""
        try:
            return make()
        except ScriptError as exc:
            raise UsageError("bad-model-script", f"the model script cannot be used: {exc}",
                             "fix MODEL_SCRIPT in the step module or the file KILLPOINT_MODEL_SCRIPT names "
                             "(docs/tools.md)") from None
        except CassetteError as exc:
            raise UsageError("bad-cassette", f"the model cassette cannot be used: {exc}",
                             f"fix the file {CASSETTE_VAR} names, record it with killpoint record, or unset "
                             f"{CASSETTE_VAR} (docs/tools.md)") from None

    def _egress_library(self) -> str | None:
        """The preloaded egress guard (`egress_shim`) for a `--worker-cmd` that is not this Python, or None
        (said, with why) where it cannot guard it: no C compiler, or a statically linked program."""
        if self.egress_allowed == "*":
            return None
        program = shlex.split(self._worker_cmd or "")[:1]
        why = None
        lib = egress_shim.library()
        if lib is None:
            why = "no C compiler builds its preloaded guard (install cc)"
        elif program and egress_shim.static_program(program[0]):
            why = f"{program[0]} is statically linked, so the preloaded guard never loads in it"
        if why is not None and self._say is not None:
            self._say(f"egress guard: off for this --worker-cmd: {why}; make sure every SDK points at its fake "
                      "(docs/contracts.md)")
        return lib if why is None else None

    def _python_command(self) -> PythonCommand | None:
        """The `--worker-cmd` as this Python running a script or module (`pycommand.parse`): its
        incarnations, forked or exec'd, are behind the egress guard; None (and one line saying why) when it
        is no such command, or there is no `--worker-cmd`."""
        if not self._worker_cmd:
            return None
        cmd = pycommand.parse(shlex.split(self._worker_cmd))
        if isinstance(cmd, str):
            self._tell_exec(cmd)
            return None
        return cmd

    def _tell_exec(self, why: str) -> None:
        if self._say is not None:
            self._say(f"{pyfork_launcher.SAY} every incarnation exec'd: {why}")

    def _python_forks(self, cmd: PythonCommand | None) -> PythonForkLauncher | None:
        """The launcher of `cmd` (harness/env/pyfork_launcher.py), its servers started; None when its
        incarnations are all exec'd (`--spawn exec`; `--worker-preload none`, said)."""
        if cmd is None or self._spawn == "exec":
            return None
        if self._worker_preload == ():
            self._tell_exec("--worker-preload none")
            return None
        modules = list(self._worker_preload) if self._worker_preload is not None else pycommand.auto_preload(cmd)
        volatile = pyfork_launcher.volatile_vars(self.services)
        env = pyfork_launcher.server_env(os.environ, self.services, volatile, self.egress_allowed)
        return PythonForkLauncher(cmd, modules, env, volatile, self._say)

    @property
    def black_box(self) -> bool:
        """True when incarnations are a user's `--worker-cmd` (steps are not known in advance)."""
        return bool(self._worker_cmd)

    @property
    def black_box_forked(self) -> bool:
        """True when a black-box worker's incarnations are forked from servers that preloaded its libraries
        (harness/env/pyfork_launcher.py): one starts in milliseconds of CPU, not an interpreter importing
        its framework. False for the reference worker and for black-box workers that are exec'd."""
        return isinstance(self.launcher, PythonForkLauncher) and self.launcher.forking

    @property
    def worker_cmd(self) -> str | None:
        """The user's `--worker-cmd`, if incarnations are black-box workers."""
        return self._worker_cmd

    def connect(self) -> psycopg.Connection:
        """A new autocommit connection to the run database (the caller closes it)."""
        return psycopg.connect(self.pg.dsn, autocommit=True, application_name="killpoint-harness")

    @contextlib.contextmanager
    def pooled(self) -> Iterator[psycopg.Connection]:
        """An autocommit connection to the run database, kept for the session between uses: for the short
        queries on a trial's hot path (a new connection costs a few ms, more under load). The caller must
        leave it as it found it (no session settings, no open transaction). One that failed, is in a
        transaction, or whose server has said something unasked (it went away: a `db-crash` restart) is
        closed instead of kept."""
        conn = None
        with self._lock:
            while self._idle and conn is None:
                conn = self._idle.pop()
                if not _still_idle(conn):
                    conn.close()
                    conn = None
        if conn is None:
            conn = self.connect()
        try:
            yield conn
        except BaseException:
            conn.close()
            raise
        if conn.closed or conn.broken or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            conn.close()
            return
        with self._lock:
            if len(self._idle) < POOL_SIZE:
                self._idle.append(conn)
                return
        conn.close()

    def _close_pool(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            with contextlib.suppress(psycopg.Error):
                conn.close()

    # ---- routing events to the run they belong to ---------------------------------------------
    def attach(self, listener: RunListener) -> None:
        """Route the events of `listener.run_id` to it (a black-box run's checkpoint points too)."""
        with self._lock:
            self._listeners[listener.run_id] = listener
        if self._worker_cmd and self._hold_table():
            self._sqlbarriers[listener.run_id] = sqlbarrier.SqlBarrier(self.pg.dsn, listener, self.adapter)

    def barrier_key(self, run_id: str) -> int | None:
        """The advisory lock key of the run's SQL barrier (`SqlBarrier.key`); None for a run without one."""
        held = self._sqlbarriers.get(run_id)
        return held.key if held is not None else None

    def settle(self, run_id: str) -> None:
        """Wait until the run's held checkpoint commit, if any, is resolved (`SqlBarrier.settle`)."""
        held = self._sqlbarriers.get(run_id)
        if held is not None:
            held.settle()

    def _hold_table(self) -> bool:
        """True once the adapter's table carries the barrier trigger and the adapter's fence (installed here
        on first sight of a table the user's framework created, and removed again when the session ends).
        Under a lock: at `-j 2` two runs attach at once, and two sessions' DDL on one table would collide."""
        with self._hold_lock:
            if self._held_table:
                return True
            hold = self.adapter.hold
            with self.connect() as conn:
                if not table_exists(conn, hold.table):
                    return False  # the framework has not made its tables yet (the crash-free run will)
                self._stack.callback(self._unhold)
                audit.install(conn, hold=hold)  # the framework's committed writes, for the checkers
                sqlbarrier.install(conn, hold=hold)
                self.adapter.fence(conn)  # concurrent runs kept apart where the framework shares a queue
            self._held_table = True
            return True

    def _unhold(self) -> None:
        with contextlib.suppress(psycopg.Error), self.connect() as conn:
            self.adapter.unfence(conn)
            sqlbarrier.uninstall(conn, self.adapter.hold)
            audit.uninstall(conn, self.adapter.hold)

    def detach(self, listener: RunListener) -> None:
        with self._lock:
            self._listeners.pop(listener.run_id, None)
        held = self._sqlbarriers.pop(listener.run_id, None)
        if held is not None:
            held.close()

    def _listener(self, run_id: Any) -> RunListener | None:
        with self._lock:
            return self._listeners.get(run_id)

    def _worker_point(self, msg: dict) -> bool:
        listener = self._listener(msg.get("run_id"))
        return True if listener is None else listener.on_worker_point(msg)

    def _worker_note(self, msg: dict) -> None:
        listener = self._listener(msg.get("run_id"))
        if listener is not None:
            listener.on_note(msg)

    def _service_hook(self, point: str, info: dict) -> Decision:
        # A worker's unanswered notes (drain.signal from its SIGTERM handler) before the request it sent next
        barrier = getattr(self, "barrier", None)
        if barrier is not None:
            barrier.caught_up()
        self._nudge(info.get("run_id"))
        listener = self._listener(info.get("run_id"))
        return Decision.GO if listener is None else listener.on_service_point(point, info)

    def _on_start(self, inc: Incarnation) -> None:
        self._nudge(inc.run_id)
        listener = self._listener(inc.run_id)
        if listener is not None:
            listener.on_start(inc)

    def _nudge(self, run_id: Any) -> None:
        """Tell the run's SQL barrier, if it has one, that the run is busy (`SqlBarrier.nudge`)."""
        held = self._sqlbarriers.get(run_id)
        if held is not None:
            held.nudge()

    def _on_exit(self, inc: Incarnation) -> None:
        listener = self._listener(inc.run_id)
        if listener is not None:
            listener.on_exit(inc)


def egress_hosts(dsn: str | None, allow: tuple[str, ...]) -> str:
    """`egress.ALLOW_VAR`'s value: the `--dsn` server's hosts (its `host`/`hostaddr`, else PGHOST and
    PGHOSTADDR; a unix socket folder needs none) and `allow`; `*` if `allow` has it."""
    if "*" in allow:
        return "*"
    hosts: list[str] = []
    if dsn:
        try:
            params = psycopg.conninfo.conninfo_to_dict(dsn)
        except psycopg.Error:
            params = {}
        for key, var in (("host", "PGHOST"), ("hostaddr", "PGHOSTADDR")):
            value = str(params.get(key) or os.environ.get(var) or "")
            hosts += [h for h in value.split(",") if h and not h.startswith("/")]
    return ",".join(dict.fromkeys([*hosts, *allow]))


POOL_SIZE = 8
"""Idle connections `Environment.pooled` keeps at most (a trial uses one at a time; `-j` several)."""


def _still_idle(conn: psycopg.Connection) -> bool:
    """An idle connection is silent: readable means the server closed it or said why it would."""
    if conn.closed or conn.broken:
        return False
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable
