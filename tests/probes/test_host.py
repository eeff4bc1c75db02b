from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import pytest

from tfperf.probes import HostProbe
from tfperf.probes import host as host_module
from tfperf.probes.host import TreeUsage
from tfperf.results import CpuUsage, HostMemory, TimedValue

MB = 1024 * 1024

# Writes every page of 200 MB so it is resident, says so, then waits to be killed.
HOLD_MEMORY = (
    "import sys, time\n"
    "block = b'\\x01' * (200 * 1024 * 1024)\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)
# Burns half a second of its own CPU, however long a loaded host makes that take.
BUSY_HALF_SECOND = "import time\nwhile time.process_time() < 0.5:\n    pass\n"


@pytest.fixture
def child_holding_memory() -> Iterator[subprocess.Popen[str]]:
    child = subprocess.Popen([sys.executable, "-c", HOLD_MEMORY], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        yield child
    finally:
        child.kill()
        child.wait()


def test_peak_rss_includes_children(child_holding_memory):
    own_rss = psutil.Process().memory_info().rss
    probe = HostProbe()
    assert probe.open() is None
    probe.sample(0.0)
    probe.sample(0.1)
    probe.close()

    memory = probe.memory()
    assert memory.peak_rss_bytes >= own_rss + 150 * MB
    assert memory.mean_rss_bytes >= own_rss + 150 * MB
    assert 0 < memory.available_bytes <= memory.total_bytes
    assert [point.t_s for point in memory.samples] == [0.0, 0.1]


def test_cpu_of_a_busy_child_counts_even_after_it_exits():
    probe = HostProbe()
    assert probe.open() is None
    start = time.monotonic()
    probe.sample(0.0)
    subprocess.run([sys.executable, "-c", BUSY_HALF_SECOND], check=True)
    wall_s = time.monotonic() - start
    probe.sample(wall_s)
    probe.close()

    cpu = probe.cpu()
    # The child's CPU seconds are fixed; its share of the wall clock depends on the load.
    seen_cpu_s = cpu.mean_percent / 100 * wall_s
    assert seen_cpu_s >= 0.45, seen_cpu_s  # the kernel counts CPU time in clock ticks
    assert cpu.peak_percent >= cpu.mean_percent > 0
    assert cpu.cpu_count >= 1
    assert len(cpu.samples) == 1


def test_unreadable_process_is_a_reason():
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    probe = HostProbe(pid=gone.pid)
    reason = probe.open()
    assert reason is not None
    assert reason.startswith(f"psutil cannot read process {gone.pid}: ")


def test_no_sample_gives_zeros():
    probe = HostProbe()
    probe.open()
    assert probe.memory() == HostMemory(0, 0, 0, 0, [])
    cpu = probe.cpu()
    assert (cpu.mean_percent, cpu.peak_percent, cpu.samples) == (0.0, 0.0, [])


def test_one_sample_gives_no_cpu_figure():
    probe = HostProbe()
    probe.open()
    probe.sample(0.0)
    assert probe.memory().peak_rss_bytes > 0
    cpu = probe.cpu()
    assert (cpu.mean_percent, cpu.peak_percent, cpu.samples) == (0.0, 0.0, [])


def _scripted(monkeypatch, readings: list[tuple[int, float]]) -> None:
    usages = iter(TreeUsage(rss_bytes=rss, cpu_s=cpu) for rss, cpu in readings)
    monkeypatch.setattr(host_module, "read_tree", lambda process, children=None: next(usages))


def test_cpu_and_memory_figures_are_exact(monkeypatch):
    probe = HostProbe()
    assert probe.open() is None
    # A child leaves the tree between t=1 and t=2: its CPU seconds drop out of the sum.
    _scripted(monkeypatch, [(100, 10.0), (300, 10.5), (200, 10.0), (200, 12.0)])
    for t_s in (0.0, 1.0, 2.0, 4.0):
        probe.sample(t_s)

    cpu = probe.cpu()
    assert cpu == CpuUsage(
        mean_percent=62.5,  # (0.5 + 0 + 2.0) CPU seconds over 4 wall seconds
        peak_percent=100.0,
        cpu_count=cpu.cpu_count,
        samples=[TimedValue(1.0, 50.0), TimedValue(2.0, 0.0), TimedValue(4.0, 100.0)],
    )
    memory = probe.memory()
    assert (memory.peak_rss_bytes, memory.mean_rss_bytes) == (300, 200)
    assert memory.samples == [
        TimedValue(0.0, 100),
        TimedValue(1.0, 300),
        TimedValue(2.0, 200),
        TimedValue(4.0, 200),
    ]


def test_repeated_timestamp_folds_into_the_next_interval(monkeypatch):
    probe = HostProbe()
    probe.open()
    _scripted(monkeypatch, [(1, 0.0), (1, 0.5), (1, 1.0)])
    for t_s in (0.0, 0.0, 1.0):
        probe.sample(t_s)
    cpu = probe.cpu()
    assert (cpu.mean_percent, cpu.peak_percent) == (100.0, 100.0)
    assert cpu.samples == [TimedValue(1.0, 100.0)]


def test_root_process_vanishing_skips_samples(monkeypatch):
    probe = HostProbe()
    probe.open()

    def gone(process, children=None):
        raise psutil.NoSuchProcess(process.pid)

    monkeypatch.setattr(host_module, "read_tree", gone)
    probe.sample(0.0)
    assert probe.available
    assert probe.memory().samples == []


def test_children_are_relisted_only_every_interval(monkeypatch):
    listings = []
    real_children = psutil.Process.children

    def counting(self, recursive=False):
        listings.append(recursive)
        return real_children(self, recursive=recursive)

    monkeypatch.setattr(psutil.Process, "children", counting)
    probe = HostProbe()
    probe.open()
    listings.clear()
    for t in (0.0, 0.05, 0.5, 0.99, 1.0, 1.5, 2.1):
        probe.sample(t)
    assert len(listings) == 3  # at 0.0, 1.0 and 2.1


def test_cpu_peak_never_exceeds_every_core_busy(monkeypatch):
    # A child reaped right after a sample hands 0.3 CPU seconds to its parent within 1 ms of
    # the fake clock: taken alone, that interval reads 30,000 %.
    probe = HostProbe(cpu_count=2, peak_window_s=0.5)
    probe.open()
    _scripted(monkeypatch, [(1, 0.0), (1, 0.5), (1, 0.8), (1, 1.0), (1, 1.001), (1, 1.9)])
    for t_s in (0.0, 0.5, 0.501, 1.0, 1.001, 1.002):
        probe.sample(t_s)

    cpu = probe.cpu()
    assert cpu.cpu_count == 2
    assert cpu.peak_percent == pytest.approx(100.0)  # (0.3 + 0.2) CPU s over 0.5 s
    assert cpu.peak_percent <= 100.0 * cpu.cpu_count
    assert max(point.value for point in cpu.samples) == pytest.approx(200.0)  # capped, not 90,000
    assert cpu.mean_percent == pytest.approx(189.6, abs=0.1)  # 1.9 CPU s over 1.002 s


def test_cpu_peak_of_a_run_shorter_than_one_window_is_capped(monkeypatch):
    probe = HostProbe(cpu_count=2, peak_window_s=0.5)
    probe.open()
    _scripted(monkeypatch, [(1, 0.0), (1, 0.28)])
    for t_s in (0.0, 0.001):
        probe.sample(t_s)
    cpu = probe.cpu()
    assert (cpu.peak_percent, cpu.mean_percent) == (200.0, 200.0)
