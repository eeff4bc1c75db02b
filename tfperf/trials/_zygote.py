"""Trials forked from one process that imported the framework once: `forked_trials`.

A trial's process spends most of its start importing the framework (TensorFlow and Keras, or
torch), the same in every trial. While `forked_trials(modules)` is active, `run_trial` asks a
zygote, `python -m tfperf.trials._zygote`, that imported `modules` once, to fork each trial's
worker instead of starting a fresh interpreter. Each trial is still a process of its own, in a
session of its own, killed with its group over a budget, and its pipeline file is imported
fresh in it. What it shares with the zygote is only those modules as imported: no framework
runtime has started there (no device was listed, no op ran), so no trial inherits another's
state, threads or devices.

A forked process maps its parent's files without their pages in its page table, so its RSS
would leave out the framework's library pages a fresh interpreter's import touched (about
300 MiB of TensorFlow's), and every peak RAM figure would read low. Each trial therefore
first maps in the file pages the zygote's imports made resident (`resident_file_ranges`,
`populate`): its RSS, and so its peak and its budget, read as a fresh interpreter's would.

The zygote and the tuner talk over a Unix socket. For each trial the tuner sends the request
file's path with two descriptors (the protocol pipe's write end and the log), and the zygote
answers `started PID`; when a trial's process ends, the zygote reaps it and sends
`exit PID STATUS` (`subprocess`'s convention: minus the signal that killed it). When the
tuner closes the socket, or dies, the zygote exits, and its trials, which watch their parent,
exit with it.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import select
import socket
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from tfperf.trials._runner import TrialFiles
    from tfperf.trials._worker import WorkRequest

#: How often the zygote reaps its trials while no request arrives (seconds).
_REAP_S = 0.05
#: How long the zygote may take to exit once its socket is closed (seconds).
_CLOSE_S = 5.0
#: How long the zygote may take to fork a trial, its imports included the first time (seconds).
_START_S = 300.0
#: madvise(2) advice that maps a range's pages in for reading (Linux 5.14 and later).
_MADV_POPULATE_READ = 22
#: Mappings of these are devices or kernel views, never touched.
_NOT_FILES = ("/dev/", "/proc/", "/sys/")
_ZYGOTE: ContextVar[Zygote | None] = ContextVar("tfperf_zygote", default=None)


class ZygoteLost(RuntimeError):
    """The zygote stopped answering; the trial is started afresh instead."""


@contextlib.contextmanager
def forked_trials(
    modules: Sequence[str], python: str = sys.executable, *, at_once: bool = False
) -> Iterator[None]:
    """While active, `run_trial` forks each trial from a zygote that imported `modules` once;
    on exit the zygote is closed. Nothing to preload: no zygote.

    The zygote starts at the first trial; `at_once`, here, so its imports run beside what the
    caller does before that trial (a command's own import of the framework, its study), at
    the cost of a start for nothing when no trial runs. Inside another `forked_trials` of the
    same modules, that one's zygote serves.
    """
    current = _ZYGOTE.get()
    reused = current is not None and (current.python, current.modules) == (python, tuple(modules))
    if not modules or reused:
        yield
        return
    zygote = Zygote(python, modules)
    if at_once:
        zygote.open()
    token = _ZYGOTE.set(zygote)
    try:
        yield
    finally:
        _ZYGOTE.reset(token)
        zygote.close()


def active(python: str) -> Zygote | None:
    """The zygote of the `forked_trials` in force for `python`'s trials; None without one."""
    zygote = _ZYGOTE.get()
    if zygote is None or zygote.lost or zygote.python != python:
        return None
    return zygote


class Zygote:
    """The tuner's side of one zygote: starts it (at the first trial, or `open`), forks
    trials through it."""

    def __init__(self, python: str, modules: Sequence[str]) -> None:
        self.python = python
        self.modules = tuple(modules)
        self._process: subprocess.Popen[bytes] | None = None
        self._channel: socket.socket | None = None
        self._buffer = b""
        self._exits: dict[int, int] = {}
        #: Whether a trial was sent: one never used holds nothing and is killed at once.
        self._used = False
        #: Lost once: every later trial starts afresh, without another try.
        self.lost = False

    def open(self) -> None:
        """Starts the zygote now, its imports in the background; the first fork waits for
        them. One that cannot start now is tried again at the first trial, which says why."""
        with contextlib.suppress(ZygoteLost):
            self._open()

    def start(self, files: TrialFiles, request: WorkRequest) -> ForkedChild:
        """Writes `request` to `files` and forks its worker, stderr in the log.

        Raises:
            ZygoteLost: the zygote could not be started or stopped answering; it is closed.
        """
        try:
            return self._start(files, request)
        except ZygoteLost:
            self.lost = True
            self.close()
            raise

    def _start(self, files: TrialFiles, request: WorkRequest) -> ForkedChild:
        files.request.write_text(json.dumps(request.to_dict()), encoding="utf-8")
        channel = self._open()
        read, write = os.pipe()
        try:
            with files.log.open("wb") as log:
                socket.send_fds(channel, [f"{files.request}\n".encode()], [write, log.fileno()])
            self._used = True
        except OSError as error:
            os.close(read)
            raise ZygoteLost(f"the zygote is gone: {error}") from error
        finally:
            os.close(write)
        try:
            pid = int(self._line_of("started", _START_S))
        except ZygoteLost:
            os.close(read)
            raise
        stdout = os.fdopen(read, "r", encoding="utf-8", errors="replace")
        return ForkedChild(self, pid, stdout)

    def exit_status(self, pid: int, timeout: float | None) -> int | None:
        """`pid`'s exit status once the zygote reaped it; None when `timeout` passed first.
        A lost zygote leaves its trials no parent, so they exit: -9 is returned then."""
        while pid not in self._exits:
            try:
                self._read(timeout)
            except TimeoutError:
                return None
            except ZygoteLost:
                return -9
        return self._exits.pop(pid)

    def close(self) -> None:
        """Closes the socket; the zygote exits (killed when it does not within `_CLOSE_S`, and
        at once when no trial was sent to it: a command that stops before its first trial
        does not wait for the zygote's imports)."""
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        if self._process is not None:
            try:
                self._process.wait(_CLOSE_S if self._used else 0)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None

    def _open(self) -> socket.socket:
        if self._channel is not None and self._process is not None:
            status = self._process.poll()
            if status is None:
                return self._channel
            raise ZygoteLost(f"the zygote exited with status {status}")
        ours, theirs = socket.socketpair()
        env = dict(os.environ)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        try:
            self._process = subprocess.Popen(
                [self.python, "-m", "tfperf.trials._zygote", str(theirs.fileno()), *self.modules],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                env=env,
                start_new_session=True,  # a terminal's Ctrl-C reaches the tuner alone
            )
        except OSError as error:
            ours.close()
            raise ZygoteLost(f"the zygote could not start: {error}") from error
        finally:
            theirs.close()
        self._channel = ours
        return ours

    def _line_of(self, kind: str, timeout: float) -> str:
        """The argument of the next line of `kind`, keeping the exits read before it.

        Raises:
            ZygoteLost: the socket closed, or no such line came within `timeout` seconds.
        """
        while True:
            try:
                line = self._read(timeout)
            except TimeoutError:
                raise ZygoteLost(f"the zygote did not answer within {timeout:g} s") from None
            if line.startswith(f"{kind} "):
                return line.split(" ", 1)[1]

    def _read(self, timeout: float | None) -> str:
        """One line from the zygote (exits recorded as they come).

        Raises:
            TimeoutError: none within `timeout` seconds. ZygoteLost: the socket closed.
        """
        channel = self._channel
        if channel is None:
            raise ZygoteLost("the zygote was closed")
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([channel], [], [], timeout)
            if not ready:
                raise TimeoutError
            chunk = channel.recv(4096)
            if not chunk:
                raise ZygoteLost("the zygote closed its socket")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        text = line.decode()
        if text.startswith("exit "):
            _, pid, status = text.split()
            self._exits[int(pid)] = int(status)
        return text


class ForkedChild:
    """A trial's worker forked by the zygote: what `run_trial` uses of a `subprocess.Popen`."""

    def __init__(self, zygote: Zygote, pid: int, stdout: IO[str]) -> None:
        self.zygote = zygote
        self.pid = pid
        self.stdout: IO[str] | None = stdout
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self.wait(0.0) if self.returncode is None else self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """The exit status, as `Popen.wait` gives it.

        Raises:
            subprocess.TimeoutExpired: the process still runs after `timeout` seconds.
        """
        if self.returncode is None:
            status = self.zygote.exit_status(self.pid, timeout)
            if status is None:
                raise subprocess.TimeoutExpired(f"trial process {self.pid}", timeout or 0.0)
            self.returncode = status
        return self.returncode


# --- the zygote's own process ------------------------------------------------------------------


def serve(channel: socket.socket, modules: Sequence[str]) -> None:
    """Imports `modules`, then forks a worker for each request until the socket closes."""
    for module in (*modules, "tfperf.trials._worker"):  # the trials' own code, once too
        importlib.import_module(module)

    resident = resident_file_ranges()

    running: set[int] = set()
    while True:
        ready, _, _ = select.select([channel], [], [], _REAP_S)
        _reap(channel, running)
        if not ready:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(channel, 4096, 2)
        except OSError:
            return
        if not data:
            return  # the tuner closed the socket, or died: its trials follow the zygote
        pid = _fork(data.decode().strip(), fds, channel, lambda argv: _work(argv, resident))
        running.add(pid)
        channel.sendall(f"started {pid}\n".encode())


def _fork(
    request: str, fds: list[int], channel: socket.socket, work: Callable[[Sequence[str]], int]
) -> int:
    """Forks a worker on `request` with `fds` (its stdout and stderr); returns its pid."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        for fd in fds:
            os.close(fd)
        return pid
    status = 1
    try:
        os.setsid()  # its own session: the tuner kills its whole group
        channel.close()
        null = os.open(os.devnull, os.O_RDONLY)
        for target, fd in enumerate((null, *fds)):
            os.dup2(fd, target)
            os.close(fd)
        status = work([request])
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(status)


def _work(argv: Sequence[str], resident: Sequence[tuple[int, int]]) -> int:
    from tfperf.trials import _worker

    populate(resident)
    return _worker.main(argv)


def resident_file_ranges() -> list[tuple[int, int]]:
    """The address ranges of this process's readable file mappings whose pages are in its
    page table (`/proc/self/pagemap`'s present bit): the library pages its imports touched.
    Empty where /proc cannot tell."""
    page = os.sysconf("SC_PAGE_SIZE")
    ranges: list[tuple[int, int]] = []
    try:
        with open("/proc/self/maps") as maps, open("/proc/self/pagemap", "rb") as pagemap:
            for line in maps:
                fields = line.split(maxsplit=5)
                path = fields[5].strip() if len(fields) == 6 else ""
                if not path.startswith("/") or path.startswith(_NOT_FILES) or fields[1][0] != "r":
                    continue
                start, end = (int(bound, 16) for bound in fields[0].split("-"))
                pagemap.seek(start // page * 8)
                entries = memoryview(pagemap.read((end - start) // page * 8)).cast("Q")
                ranges.extend(_present_runs(entries, start, page))
    except OSError:
        return []
    return ranges


def _present_runs(entries: Sequence[int], start: int, page: int) -> list[tuple[int, int]]:
    """The runs of consecutive present pages among `entries` (one per page from `start`)."""
    runs: list[tuple[int, int]] = []
    first: int | None = None
    for index, entry in enumerate(entries):
        if entry >> 63:
            first = index if first is None else first
        elif first is not None:
            runs.append((start + first * page, start + index * page))
            first = None
    if first is not None:
        runs.append((start + first * page, start + len(entries) * page))
    return runs


def populate(ranges: Sequence[tuple[int, int]]) -> None:
    """Maps `ranges` in for reading: each page faulted from the page cache it is already in."""
    libc = ctypes.CDLL(None, use_errno=True)
    page = os.sysconf("SC_PAGE_SIZE")
    for start, end in ranges:
        if libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), _MADV_POPULATE_READ):
            for address in range(start, end, page):  # an older kernel: a byte of each page
                ctypes.string_at(address, 1)


def _reap(channel: socket.socket, running: set[int]) -> None:
    """Reaps every trial that ended and tells the tuner its status."""
    while running:
        try:
            pid, wait_status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            running.clear()
            return
        if pid == 0:
            return
        running.discard(pid)
        with contextlib.suppress(OSError):
            channel.sendall(f"exit {pid} {os.waitstatus_to_exitcode(wait_status)}\n".encode())


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])), sys.argv[2:])
    os._exit(0)
