"""Host RAM of a process and its children, each page counted once.

A `DataLoader` with `num_workers > 0` forks workers that inherit the trainer's memory
copy-on-write: a dataset array the trainer holds is shared by every worker until one writes
to it. Summing each process's RSS counts those shared pages once per worker, which is where
the common "memory grows with num_workers" reading comes from. Here the total is

    trainer RSS + the sum of each child's USS

- a child's USS (`psutil`'s `memory_full_info().uss`: its private pages) is the memory that
  goes away when the worker does: what it allocated itself and the inherited pages it wrote
  to (copied on write). Pages it still shares with the trainer are not in it;
- the trainer's RSS, not its PSS: PSS splits each shared page among the processes mapping
  it, and since the children's USS leaves their shares out, the trainer's PSS would lose
  them. RSS holds every page the trainer maps, each once, the pages shared with its workers
  included.

Every child counts as a worker but multiprocessing's own helpers (`Role.HELPER`): the resource
tracker that spawn and forkserver start, and forkserver's server, whose children the workers
are. They count in the total, not as workers, so "2 workers" means the DataLoader's two.

The same figure serves every framework: a DataLoader's workers, a tf.data service's worker
processes, a trial's whole tree (`UniqueMemoryReader`, the trial watcher's reading). A single
process is its RSS, as before.

`unique_memory()` takes one reading; `MemorySampler` samples in a thread during a measured
window and keeps the peak (the reading with the largest total, with its per-process
breakdown) and a running mean, not every sample. A child that exits between listing and
reading is skipped; a child whose private pages cannot be read (another user's) counts its
RSS and says so in its `measure`.

Interface: `unique_memory(pid=None) -> UniqueMemory`,
`MemorySampler(pid=None, interval_s=0.1)` with `start()`, `stop() -> MemoryPeak`, or as a
context manager (`sampler.peak` after the block); `UniqueMemoryReader(pid)` for a watcher
that reads often (`read()`), re-reading the children's private pages at most once a second.

No framework here: it reads processes through psutil.

Example:
    >>> with MemorySampler() as sampler:  # doctest: +SKIP
    ...     for batch in loader: step(batch)
    >>> sampler.peak.peak.describe()  # doctest: +SKIP
    'host RAM 1.42 GB: trainer 0.97 GB (RSS) + 2 workers 0.45 GB (private pages)'
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable
from enum import Enum
from typing import Any

from tfperf.results import JsonRecord

__all__ = [
    "COST_RATIO",
    "Measure",
    "MemoryPeak",
    "MemorySampler",
    "ProcessMemory",
    "Role",
    "UniqueMemory",
    "UniqueMemoryReader",
    "unique_memory",
]


class Role(str, Enum):
    """What a process is to the measurement."""

    TRAINER = "trainer"  # the process that iterates the loader and trains
    WORKER = "worker"  # any other process below it: a DataLoader's workers are its children
    HELPER = "helper"  # multiprocessing's own (`_HELPERS`): started for the workers, not one


class Measure(str, Enum):
    """Which of a process's memory figures was counted."""

    RSS = "rss"  # every page it maps (the trainer; a child whose private pages are unreadable)
    USS = "uss"  # its private pages only (a child)


@dataclasses.dataclass(frozen=True)
class ProcessMemory:
    """One process's counted bytes, and which figure they are."""

    pid: int
    role: Role
    bytes: int
    measure: Measure


@dataclasses.dataclass(frozen=True)
class UniqueMemory(JsonRecord):
    """One reading: the trainer and each child, trainer first."""

    processes: tuple[ProcessMemory, ...]

    @property
    def trainer_bytes(self) -> int:
        return sum(p.bytes for p in self.processes if p.role is Role.TRAINER)

    @property
    def workers_bytes(self) -> int:
        return sum(p.bytes for p in self.processes if p.role is Role.WORKER)

    @property
    def workers(self) -> int:
        return sum(1 for p in self.processes if p.role is Role.WORKER)

    @property
    def helpers_bytes(self) -> int:
        return sum(p.bytes for p in self.processes if p.role is Role.HELPER)

    @property
    def total_bytes(self) -> int:
        """Host RAM of the trainer, its workers and multiprocessing's helpers, shared pages
        once."""
        return self.trainer_bytes + self.workers_bytes + self.helpers_bytes

    def describe(self) -> str:
        helpers = sum(1 for p in self.processes if p.role is Role.HELPER)
        helped = (
            f" + {helpers} helper{'s' * (helpers != 1)} {_gb(self.helpers_bytes)}"
            if helpers
            else ""
        )
        return (
            f"host RAM {_gb(self.total_bytes)}: trainer {_gb(self.trainer_bytes)} (RSS) + "
            f"{self.workers} workers {_gb(self.workers_bytes)} (private pages){helped}"
        )

    @classmethod
    def from_dict(cls, data: Any) -> UniqueMemory:
        return cls.validate(data)


@dataclasses.dataclass(frozen=True)
class MemoryPeak(JsonRecord):
    """What a sampled window saw: the reading with the largest total, and the running mean.

    `peak` is None only when no reading was taken. `most_workers` is the most children seen
    in one reading.
    """

    peak: UniqueMemory | None
    samples: int
    mean_total_bytes: float
    most_workers: int

    @property
    def peak_bytes(self) -> int:
        return self.peak.total_bytes if self.peak is not None else 0

    @classmethod
    def from_dict(cls, data: Any) -> MemoryPeak:
        return cls.validate(data)


def unique_memory(pid: int | None = None) -> UniqueMemory:
    """One reading of the trainer `pid` (None: this process) and all its children."""
    import psutil

    trainer = psutil.Process(pid if pid is not None else os.getpid())
    processes = [ProcessMemory(trainer.pid, Role.TRAINER, trainer.memory_info().rss, Measure.RSS)]
    try:
        children = trainer.children(recursive=True)
    except psutil.NoSuchProcess:
        children = []
    for child in children:
        counted = _private(child)
        if counted is not None:
            processes.append(ProcessMemory(child.pid, _role(child, trainer.pid), *counted))
    return UniqueMemory(tuple(processes))


#: What multiprocessing's helper processes run: spawn and forkserver start a resource tracker,
#: forkserver a server that forks the workers (`python -c "from multiprocessing.X import ..."`).
_HELPERS = ("multiprocessing.resource_tracker", "multiprocessing.forkserver")


def _role(child: Any, trainer: int) -> Role:
    """HELPER for a child of the trainer's own that runs one of multiprocessing's helpers;
    WORKER otherwise. Only the trainer's own children: forkserver's workers are the server's,
    and keep its command line."""
    import psutil

    try:
        if child.ppid() != trainer:
            return Role.WORKER
        command = " ".join(child.cmdline())
    except psutil.Error:
        return Role.WORKER
    return (
        Role.HELPER if any(f"from {name} import" in command for name in _HELPERS) else Role.WORKER
    )


#: The most a sampler may cost: the wait after a reading is at least this many times as long
#: as the reading took, so the sampler uses at most a tenth of a core.
COST_RATIO = 10.0


#: Seconds between readings of the children's private pages by `UniqueMemoryReader`.
CHILDREN_INTERVAL_S = 1.0


class UniqueMemoryReader:
    """Host RAM of process `pid` and its children, shared pages once, for frequent readings.

    Every `read()` reads the process's RSS (cheap); the children are listed and their
    private pages read again only after `children_interval_s`, the last figure kept in
    between, because reading private pages makes the kernel walk each child's page tables:
    about 15 ms of CPU for three workers with torch loaded, 36 ms for eight, too dear for a
    watcher that reads ten times a second. As in `MemorySampler`, the wait is also at least
    `COST_RATIO` times what the last such reading took, so it never uses more than a tenth
    of a core. A child started or grown since the last such reading is counted from the next.

    Example:
        >>> reader = UniqueMemoryReader(os.getpid())
        >>> reader.read() > 0
        True
    """

    def __init__(
        self,
        pid: int,
        children_interval_s: float = CHILDREN_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        import psutil

        if children_interval_s < 0:
            raise ValueError(f"`children_interval_s >= 0` must hold, but got {children_interval_s}")
        self.children_interval_s = children_interval_s
        self._clock = clock
        try:
            self._process: Any = psutil.Process(pid)
        except psutil.Error:
            self._process = None
        self._children_bytes = 0
        self._children_read_at: float | None = None
        self._cost = 0.0  # seconds the last reading of the children took

    def read(self) -> int | None:
        """The process's RSS plus its children's private bytes; None once it is gone."""
        import psutil

        if self._process is None:
            return None
        try:
            rss = int(self._process.memory_info().rss)
        except psutil.Error:
            return None
        now = self._clock()
        last = self._children_read_at
        if last is None or now - last >= max(self.children_interval_s, COST_RATIO * self._cost):
            started = time.perf_counter()
            self._children_bytes = self._read_children()
            self._cost = time.perf_counter() - started
            self._children_read_at = now
        return rss + self._children_bytes

    def _read_children(self) -> int:
        import psutil

        try:
            children = self._process.children(recursive=True)
        except psutil.Error:
            return 0
        counted = (_private(child) for child in children)
        return sum(figure[0] for figure in counted if figure is not None)


def _private(child: Any) -> tuple[int, Measure] | None:
    """A child's private bytes (USS), its RSS when those are unreadable, None if it exited."""
    import psutil

    try:
        try:
            return child.memory_full_info().uss, Measure.USS
        except psutil.AccessDenied:
            return child.memory_info().rss, Measure.RSS
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return None


class MemorySampler:
    """Samples `unique_memory` every `interval_s` in a thread between `start` and `stop`.

    A reading is also taken at `start` and at `stop`, so a short window has at least two.
    Reading a child's private pages makes the kernel walk its page tables: about 4 ms of CPU
    per worker that has torch loaded, 30 ms for eight. On a machine of few cores that CPU is
    taken from the loop being measured, so the wait after each reading is at least
    `COST_RATIO` times what the reading took: with many workers, readings are sparser and a
    brief peak between two can be missed.
    """

    def __init__(
        self,
        pid: int | None = None,
        interval_s: float = 0.1,
        read: Callable[[int | None], UniqueMemory] = unique_memory,
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"`interval_s > 0` must hold, but got interval_s={interval_s}")
        self.pid = pid
        self.interval_s = interval_s
        self._read = read
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._peak: UniqueMemory | None = None
        self._samples = 0
        self._sum = 0.0
        self._most_workers = 0
        self.peak: MemoryPeak | None = None  # set by `stop`

    def start(self) -> MemorySampler:
        if self._thread is not None:
            raise RuntimeError("this MemorySampler has started already; make a new one")
        self._sample()
        self._thread = threading.Thread(target=self._run, name="tfperf-memory", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> MemoryPeak:
        """Stops sampling (after one last reading) and returns what the window saw."""
        if self._thread is None:
            raise RuntimeError("MemorySampler.stop() before start()")
        self._stop.set()
        self._thread.join()
        self._sample()
        with self._lock:
            mean = self._sum / self._samples if self._samples else 0.0
            self.peak = MemoryPeak(self._peak, self._samples, mean, self._most_workers)
        return self.peak

    def __enter__(self) -> MemorySampler:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def _run(self) -> None:
        cost = 0.0
        while not self._stop.wait(max(self.interval_s, COST_RATIO * cost)):
            started = time.perf_counter()
            self._sample()
            cost = time.perf_counter() - started

    def _sample(self) -> None:
        reading = self._read(self.pid)
        with self._lock:
            self._samples += 1
            self._sum += reading.total_bytes
            self._most_workers = max(self._most_workers, reading.workers)
            if self._peak is None or reading.total_bytes > self._peak.total_bytes:
                self._peak = reading


def _gb(count: int) -> str:
    return f"{count / 1e9:.3g} GB"
