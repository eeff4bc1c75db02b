"""Resident memory and CPU time of this process and everything it started.

Figures cover the whole process tree (the process plus its children, recursively), because
input pipelines often do work in helper processes. RSS is summed over the tree, so pages that
forked children share with their parent are counted once per process: the sum can overstate
the physical memory in use, never understate it.

CPU time of each process includes the time of the children it has already waited for
(psutil's `children_user` / `children_system`), so a helper that starts and exits between two
samples is still counted, and a child that exits moves its time to its parent instead of
dropping out. Only a child orphaned out of the tree loses its time; the interval where that
happens is clamped at 0 % rather than reported as negative.

The peak is taken over windows of at least `peak_window_s`, never over one short interval:
CPU times advance in clock ticks (10 ms), and a child reaped between two samples hands all its
CPU seconds to its parent at once, so an interval of a few milliseconds can read as thousands of
percent. No figure exceeds 100 % per core the machine gives the process tree.
"""

from __future__ import annotations

import dataclasses
import logging
import os

import psutil

from tfperf.probes.base import Probe, RunningStats, Series
from tfperf.results import CpuUsage, HostMemory

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class TreeUsage:
    """One reading of a process tree: summed RSS (bytes) and CPU time (user + system, seconds)."""

    rss_bytes: int
    cpu_s: float


def read_tree(process: psutil.Process, children: list[psutil.Process] | None = None) -> TreeUsage:
    """Sums RSS and CPU time over `process` and its live descendants.

    `children` is a list from an earlier `process.children(recursive=True)`; None lists them
    now. Children may exit between being listed and being read; those are skipped. Raises
    `psutil.Error` only when `process` itself cannot be read.
    """
    rss, cpu = _read_one(process)
    for child in process.children(recursive=True) if children is None else children:
        try:
            child_rss, child_cpu = _read_one(child)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        rss += child_rss
        cpu += child_cpu
    return TreeUsage(rss_bytes=rss, cpu_s=cpu)


def _read_one(process: psutil.Process) -> tuple[int, float]:
    with process.oneshot():
        rss = process.memory_info().rss
        times = process.cpu_times()
    cpu = times.user + times.system + times.children_user + times.children_system
    return rss, cpu


class HostProbe(Probe):
    """Samples RSS and CPU use of a process tree with psutil.

    Args:
        pid: the root of the tree; `None` means this process.
        cpu_count: cores the tree can use, the cap on every CPU figure (100 % each); None
            reads the machine's logical CPUs.
        peak_window_s: shortest stretch of time the peak CPU figure is taken over.

    Example:
        >>> probe = HostProbe()
        >>> probe.open() is None
        True
        >>> probe.sample(0.0); probe.sample(0.1)
        >>> probe.memory().peak_rss_bytes > 0
        True
    """

    name = "host"

    #: Seconds between re-listings of the process tree. Listing scans all of /proc (about
    #: 0.8 ms, holding the GIL), which at every 50 ms sample cost the measured loop ~5%; a
    #: child started in between is counted from the next listing, and one that exits moves
    #: its CPU time to its parent.
    relist_interval_s = 1.0

    def __init__(
        self, pid: int | None = None, *, cpu_count: int | None = None, peak_window_s: float = 0.5
    ) -> None:
        super().__init__()
        if peak_window_s <= 0:
            raise ValueError(f"`peak_window_s > 0` must hold, but got {peak_window_s}")
        self.pid = os.getpid() if pid is None else pid
        self.cpu_count = cpu_count or psutil.cpu_count(logical=True) or 1
        self.peak_window_s = peak_window_s
        # CPU and wall seconds of the intervals since the last complete peak window.
        self._window_cpu_s = 0.0
        self._window_wall_s = 0.0
        self._process: psutil.Process | None = None
        self._rss = RunningStats()
        self._cpu = RunningStats()
        self._rss_series = Series()
        self._cpu_series = Series()
        self._memory_total = 0
        self._memory_available = 0
        self._first: tuple[float, TreeUsage] | None = None
        self._last: tuple[float, TreeUsage] | None = None
        # CPU seconds summed over intervals, each clamped at 0: survives children leaving.
        self._cpu_s_total = 0.0
        self._warned_gone = False
        self._children: list[psutil.Process] = []
        self._listed_at: float | None = None

    def _open(self) -> str | None:
        try:
            process = psutil.Process(self.pid)
            read_tree(process)
        except psutil.Error as error:
            return f"psutil cannot read process {self.pid}: {error}"
        self._process = process
        return None

    def _sample(self, t_s: float) -> None:
        if self._process is None:
            return
        try:
            if self._listed_at is None or t_s - self._listed_at >= self.relist_interval_s:
                self._children = self._process.children(recursive=True)
                self._listed_at = t_s
            usage = read_tree(self._process, self._children)
            memory = psutil.virtual_memory()
        except psutil.Error as error:
            self._warn_gone(error)
            return
        self._memory_total = memory.total
        self._memory_available = memory.available
        self._record(t_s, usage)

    def _record(self, t_s: float, usage: TreeUsage) -> None:
        """Adds one tree reading taken at `t_s` to the statistics."""
        self._rss.add(usage.rss_bytes)
        self._rss_series.add(t_s, usage.rss_bytes)
        if self._last is None:
            self._first = self._last = (t_s, usage)
            return
        last_t, last_usage = self._last
        wall_s = t_s - last_t
        if wall_s <= 0:
            # Same instant as the previous reading: let the next interval cover this one.
            return
        cpu_s = max(0.0, usage.cpu_s - last_usage.cpu_s)
        self._cpu_s_total += cpu_s
        self._cpu_series.add(t_s, self._percent(cpu_s, wall_s))
        self._window_cpu_s += cpu_s
        self._window_wall_s += wall_s
        if self._window_wall_s >= self.peak_window_s:
            self._cpu.add(self._percent(self._window_cpu_s, self._window_wall_s))
            self._window_cpu_s = self._window_wall_s = 0.0
        self._last = (t_s, usage)

    def _percent(self, cpu_s: float, wall_s: float) -> float:
        """CPU use over `wall_s`, capped at what `cpu_count` cores can do."""
        return min(cpu_s / wall_s * 100.0, 100.0 * self.cpu_count)

    def _warn_gone(self, error: psutil.Error) -> None:
        if not self._warned_gone:
            logger.warning(
                "host probe cannot read process %d, skipping samples: %s", self.pid, error
            )
            self._warned_gone = True

    def _close(self) -> None:
        self._process = None

    def memory(self) -> HostMemory:
        """Peak and mean RSS of the tree, system memory at the last sample, and the RSS series."""
        return HostMemory(
            peak_rss_bytes=int(self._rss.peak_or_zero),
            mean_rss_bytes=int(self._rss.mean),
            total_bytes=self._memory_total,
            available_bytes=self._memory_available,
            samples=self._rss_series.points(),
        )

    def cpu(self) -> CpuUsage:
        """CPU use of the tree: mean over the whole window, peak over one sample interval."""
        peak = self._cpu.peak_or_zero
        if self._cpu.count == 0 and self._window_wall_s > 0:  # shorter than one peak window
            peak = self._percent(self._window_cpu_s, self._window_wall_s)
        return CpuUsage(
            mean_percent=self._window_percent(),
            peak_percent=peak,
            cpu_count=self.cpu_count,
            samples=self._cpu_series.points(),
        )

    def _window_percent(self) -> float:
        # Total CPU seconds over total wall seconds weighs every interval by its length, which
        # averaging per-interval percentages would not when the sampler's intervals vary.
        if self._first is None or self._last is None:
            return 0.0
        wall_s = self._last[0] - self._first[0]
        return self._percent(self._cpu_s_total, wall_s) if wall_s > 0 else 0.0
