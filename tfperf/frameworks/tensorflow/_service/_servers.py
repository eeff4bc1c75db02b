"""tf.data service servers tfperf starts: a dispatcher in this process, workers in children.

Every child is started with `Child` and listed until it is stopped; `stop_all` (registered with
`atexit`, and run by `LocalCluster` on the way out of its block, also on Ctrl-C and SIGTERM,
which the CLI raises as `KeyboardInterrupt`) stops what is left. A child also stops by itself
when its stdin closes, so a tfperf killed with SIGKILL leaves no server behind.

Ports: 0 lets the OS choose a free one; a port asked for that is in use is a `ServiceError`
naming it, checked before gRPC tries to bind it.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import logging
import os
import queue
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from typing import IO, Any

from tfperf.errors import ServiceAddressError, ServiceError
from tfperf.frameworks.tensorflow._service._serve import ANSWER_PREFIX, HEARTBEAT_MS

logger = logging.getLogger(__name__)

_MODULE = "tfperf.frameworks.tensorflow._service._serve"
#: Jobs nobody reads are dropped after this long, so a finished measurement stops costing CPU.
JOB_GC_MS = 1000
#: A child's stop: stdin closed, then SIGTERM after `CLOSE_GRACE_S`, then SIGKILL after
#: `STOP_GRACE_S` more.
CLOSE_GRACE_S = 0.5
STOP_GRACE_S = 2.0

_running: set[Child] = set()
_lock = threading.Lock()


def host_cores() -> list[int]:
    """The CPU cores this process may run on, in order."""
    return sorted(os.sched_getaffinity(0))


@dataclasses.dataclass
class Dispatcher:
    """A dispatcher running in this process, at `address` (`HOST:PORT`)."""

    address: str
    server: Any

    @property
    def target(self) -> str:
        return f"grpc://{self.address}"

    def stop(self) -> None:
        self.server.stop()


def start_dispatcher(port: int = 0) -> Dispatcher:
    """A dispatcher in this process on `port` (0: a free one the OS picks).

    Raises:
        ServiceError: `port` is in use.
    """
    import tensorflow as tf

    check_port_free(port)
    service = tf.data.experimental.service
    config = service.DispatcherConfig(
        port=port, job_gc_check_interval_ms=JOB_GC_MS, job_gc_timeout_ms=JOB_GC_MS
    )
    try:
        server = service.DispatchServer(config)
    except RuntimeError as error:
        raise ServiceError(_port_message(port, str(error))) from error
    return Dispatcher(address=server.target.split("://", 1)[1], server=server)


def check_port_free(port: int) -> None:
    """Raises `ServiceError` if `port` (not 0) cannot be bound on loopback."""
    if port == 0:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("localhost", port))
        except OSError as error:
            raise ServiceError(_port_message(port, error.strerror or str(error))) from error


def _port_message(port: int, cause: str) -> str:
    return (
        f"cannot start a tf.data service dispatcher on port {port}: {cause}. Another process "
        f"holds the port (see `ss -ltnp 'sport = :{port}'`); pick another with --port, or "
        "--port 0 for any free one."
    )


def split_address(address: str) -> tuple[str, int]:
    """The host and port of `HOST:PORT`; an IPv6 host comes in brackets (`[::1]:5050`) and
    is returned without them, as sockets take it.

    Raises:
        ValueError: no port, or a port that is not a number.
    """
    host, _, port = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host or "localhost", int(port)


def check_reachable(address: str, timeout_s: float) -> None:
    """Raises unless a tf.data service dispatcher answers at `address` (`HOST:PORT`).

    A cheap, bounded check before a measurement: gRPC itself would retry a missing dispatcher
    for minutes, and a port held by another server would only show as a stall much later.
    First a TCP connection (nothing listening: said at once), then the dispatcher's own
    `GetVersion` call, which only a dispatcher answers.

    Raises:
        ServiceError: nothing accepts connections at `address`.
        ServiceAddressError: something does, but it is not a tf.data service dispatcher.
    """
    try:
        with socket.create_connection(split_address(address), timeout=timeout_s):
            pass
    except (OSError, ValueError) as error:
        raise ServiceError(
            f"no tf.data service dispatcher answers at {address} ({error}). Start one "
            "(tf.data.experimental.service.DispatchServer) and check the address, or leave out "
            "--service to measure on this host."
        ) from error
    problem = _dispatcher_problem(address, timeout_s)
    if problem is not None:
        raise ServiceAddressError(
            f"--service grpc://{address}: something listens there, but it is not a tf.data "
            f"service dispatcher ({problem}). Check the port: a dispatcher's is the one given "
            "to DispatcherConfig(port=...) (its log says `Started tf.data DispatchServer "
            "running at ...`)."
        )


#: A dispatcher's gRPC method that takes an empty request: answered by a dispatcher alone.
_DISPATCHER_VERSION = "/tensorflow.data.DispatcherService/GetVersion"


def _dispatcher_problem(address: str, timeout_s: float) -> str | None:
    """Why the server at `address` is not a tf.data service dispatcher; None when it is."""
    import grpc  # type: ignore[import-untyped]  # TensorFlow's own dependency

    with grpc.insecure_channel(address) as channel:
        version = channel.unary_unary(_DISPATCHER_VERSION)
        try:
            version(b"", timeout=timeout_s)  # an empty GetVersionRequest
        except grpc.RpcError as error:
            code = error.code() if isinstance(error, grpc.Call) else None
            if code is grpc.StatusCode.DEADLINE_EXCEEDED:
                return f"no gRPC answer within {timeout_s:g} s"
            if code is grpc.StatusCode.UNIMPLEMENTED:
                return "a gRPC server without the dispatcher's service"
            details = error.details() if isinstance(error, grpc.Call) else str(error)
            return f"gRPC said {getattr(code, 'name', code)}: {details}"
    return None


class Child:
    """One server process; `answer()` reads its first message, `stop()` ends it."""

    def __init__(self, role: str, request: dict[str, Any], name: str) -> None:
        self.name, self.request = name, request
        self._log: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115  # closed by `stop`
        environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", _MODULE, role, json.dumps(request)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=environment,
        )
        self._answers: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True, name=f"tfperf-{name}").start()
        with _lock:
            _running.add(self)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            line = raw.decode("utf-8", "replace")
            if line.startswith(ANSWER_PREFIX):
                self._answers.put(json.loads(line[len(ANSWER_PREFIX) :]))
        self._answers.put(None)

    def send(self, command: dict[str, Any]) -> None:
        """Writes one command line to the child's stdin."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.write((json.dumps(command) + "\n").encode("utf-8"))
            self.process.stdin.flush()
        except OSError as error:  # it died: `answer` says how
            logger.debug("could not write to the %s: %s", self.name, error)

    def answer(self, timeout_s: float) -> dict[str, Any]:
        """The child's message; raises `ServiceError` if it failed, died or took too long."""
        try:
            message = self._answers.get(timeout=timeout_s)
        except queue.Empty:
            self.stop()
            raise ServiceError(
                f"the {self.name} did not answer within {timeout_s:g} s; the host may be "
                "overloaded (raise --timeout)."
            ) from None
        if message is None or "error" in message:
            tail = self._tail()  # before `stop` closes the log
            self.stop()
            if message is not None:
                raise ServiceError(f"the {self.name} failed: {message['error']}{tail}")
            raise ServiceError(
                f"{self.gone() or f'the {self.name} ended'} before it answered{tail}"
            )
        return message

    def status(self) -> int | None:
        return self.process.poll()

    def gone(self) -> str | None:
        """Why the child is no longer running, in words ("... died: killed by signal 9");
        None while it runs."""
        status = self.process.poll()
        if status is None:
            return None
        how = f"died: killed by signal {-status}" if status < 0 else f"exited with status {status}"
        return f"the {self.name} (pid {self.process.pid}) {how}"

    def _tail(self) -> str:
        """The last lines the child wrote to stderr; empty once its log is closed."""
        if self._log.closed:  # stopped already: its log went with it
            return ""
        self._log.seek(0)
        lines = self._log.read().decode("utf-8", "replace").strip().splitlines()
        return ("\n" + "\n".join(lines[-5:])) if lines else ""

    def stop(self) -> None:
        """Ends the child (see `stop_children`)."""
        stop_children([self])


def stop_children(children: Sequence[Child]) -> None:
    """Ends `children` together: stdin closed (a serving child exits at once), then SIGTERM
    for those still running after `CLOSE_GRACE_S` (one busy importing or measuring), then
    SIGKILL after `STOP_GRACE_S`. At most about three seconds, however many there are."""
    for child in children:
        with contextlib.suppress(OSError):
            if child.process.stdin is not None:
                child.process.stdin.close()
    for grace, end in ((CLOSE_GRACE_S, "terminate"), (STOP_GRACE_S, "kill")):
        deadline = time.monotonic() + grace
        for child in children:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.process.wait(max(0.0, deadline - time.monotonic()))
        for child in children:
            if child.process.poll() is None:
                getattr(child.process, end)()
    for child in children:
        child.process.wait()
        with _lock:
            _running.discard(child)
        child._log.close()


def stop_all() -> None:
    """Stops every child still running (at exit, and on the way out of a `LocalCluster`)."""
    with _lock:
        children = list(_running)
    stop_children(children)


atexit.register(stop_all)


class LocalCluster:
    """A dispatcher and worker processes on loopback, each worker pinned to its own cores.

    Example:
        >>> with LocalCluster.start() as cluster:  # doctest: +SKIP
        ...     cluster.add_workers([[0], [1]], timeout_s=60.0)
    """

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        self.workers: list[Child] = []

    @classmethod
    @contextlib.contextmanager
    def start(cls, *, port: int = 0) -> Iterator[LocalCluster]:
        """Starts the dispatcher in this process; stops it and every worker on the way out."""
        cluster = cls(start_dispatcher(port))
        try:
            yield cluster
        finally:
            cluster.stop()

    def add_workers(
        self,
        core_sets: Sequence[Sequence[int]],
        timeout_s: float,
        spares: Sequence[Child] = (),
    ) -> None:
        """Makes one worker per core set serve this dispatcher, and waits until each does.

        `spares` are workers already started (`spawn_workers`), whose TensorFlow is imported;
        the core sets beyond them get new ones.
        """
        children = list(spares[: len(core_sets)])
        fresh = spawn_workers(len(core_sets) - len(children), first=len(self.workers) + 1)
        for child in fresh:
            child.answer(timeout_s)  # imported
        children += fresh
        self.workers += children
        for child, cores in zip(children, core_sets, strict=True):
            child.name = f"{child.name} (cores {','.join(map(str, cores))})"
            child.send({"dispatcher": self.dispatcher.address, "cores": list(cores)})
        for child in children:
            child.answer(timeout_s)  # serving
        time.sleep(2 * HEARTBEAT_MS / 1000)  # the dispatcher hears of each before a job starts

    def fault(self) -> str | None:
        """Why the cluster cannot serve any more; None while every process runs."""
        for child in self.workers:
            problem = child.gone()
            if problem is not None:
                return problem
        return None

    def stop(self) -> None:
        stop_children(self.workers)
        self.workers = []
        self.dispatcher.stop()


def spawn_workers(count: int, first: int = 1) -> list[Child]:
    """`count` worker processes, started at once; each imports TensorFlow, then waits for
    `LocalCluster.add_workers` to give it its cores and dispatcher."""
    return [Child("worker", {}, f"tf.data service worker {first + i}") for i in range(count)]
