"""Host RAM of a trainer and its DataLoader workers: inherited pages once, private pages each."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pytest

from tests.deadlines import HANG_S
from tfperf.probes.unique import (
    Measure,
    MemoryPeak,
    MemorySampler,
    ProcessMemory,
    Role,
    UniqueMemory,
    UniqueMemoryReader,
    unique_memory,
)

torch = pytest.importorskip("torch")

MB = 1024 * 1024
_OWN: list[np.ndarray] = []  # each worker's own 50 MB, alive while the worker is


def _allocate(worker_id: int) -> None:
    _OWN.append(np.ones(50 * MB // 8))  # written: private to the worker


class Held(torch.utils.data.Dataset):  # type: ignore[misc,name-defined]
    """Indexes a 100 MB array the trainer made: workers inherit it by fork, unwritten."""

    def __init__(self) -> None:
        self.data = np.ones((100 * MB // 8,))

    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int) -> Any:
        return float(self.data[index])


def _proc(pid: int, file: str, fields: tuple[str, ...]) -> int:
    """The sum of `fields` (kB) in /proc/PID/FILE, in bytes."""
    total = 0
    for line in Path(f"/proc/{pid}/{file}").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in fields:
            total += int(rest.split()[0]) * 1024
    return total


def test_trainer_and_workers_agree_with_the_processes_unique_memory() -> None:
    if not Path("/proc/self/smaps_rollup").exists():
        pytest.skip("needs Linux's /proc/PID/smaps_rollup")
    loader = torch.utils.data.DataLoader(
        Held(),
        batch_size=4,
        num_workers=2,
        worker_init_fn=_allocate,
        persistent_workers=True,
        multiprocessing_context="fork",
    )
    batches = iter(loader)
    for _ in range(4):  # both workers have started, allocated and served
        next(batches)
    time.sleep(0.3)  # their prefetch queues are full: they idle
    with MemorySampler(interval_s=0.05) as sampler:
        time.sleep(0.3)
    reading = sampler.peak.peak if sampler.peak is not None else None
    assert reading is not None
    # Independently: the trainer's resident pages, and each child's private ones.
    workers = [child.pid for child in psutil.Process().children(recursive=True)]
    trainer = _proc(os.getpid(), "status", ("VmRSS",))
    private = ("Private_Clean", "Private_Dirty")
    independent = trainer + sum(_proc(pid, "smaps_rollup", private) for pid in workers)
    naive = trainer + sum(_proc(pid, "status", ("VmRSS",)) for pid in workers)
    del batches
    assert reading.workers == 2
    assert all(p.measure is Measure.USS for p in reading.processes[1:])
    assert reading.workers_bytes >= 2 * 50 * MB  # each worker's own array counts
    assert abs(reading.total_bytes - independent) <= 0.10 * independent
    # Summing RSS would count the inherited 100 MB array once more per worker; this does not.
    assert naive - reading.total_bytes >= 2 * 100 * MB


#: A trainer whose worker starts by `sys.argv[1]`, printing the roles of one reading.
HELPED = """
import multiprocessing
import sys
import time

from tfperf.probes.unique import unique_memory

if __name__ == "__main__":
    worker = multiprocessing.get_context(sys.argv[1]).Process(target=time.sleep, args=(30,))
    worker.start()
    time.sleep(0.5)
    print(" ".join(sorted(p.role.value for p in unique_memory().processes)))
    worker.terminate()
"""


@pytest.mark.parametrize(
    ("method", "roles"),
    [
        ("fork", "trainer worker"),
        ("spawn", "helper trainer worker"),  # the resource tracker
        ("forkserver", "helper helper trainer worker"),  # and the server, the worker's parent
    ],
)
def test_multiprocessings_own_processes_are_helpers_not_workers(
    tmp_path: Path, method: str, roles: str
) -> None:
    """Spawn and forkserver start processes of multiprocessing's own beside the workers
    (Python 3.14's default on Linux is forkserver): counted in the total, not as workers."""
    script = tmp_path / "helped.py"
    script.write_text(HELPED)
    done = subprocess.run(
        [sys.executable, str(script), method], capture_output=True, text=True, timeout=HANG_S
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == roles


def test_the_sampler_keeps_the_peak_reading_and_a_running_mean() -> None:
    totals = iter([100, 300, 200, 250, 150, 120, 110])

    def read(pid: int | None) -> UniqueMemory:
        total = next(totals)
        return UniqueMemory(
            (
                ProcessMemory(1, Role.TRAINER, total - 10, Measure.RSS),
                ProcessMemory(2, Role.WORKER, 10, Measure.USS),
            )
        )

    sampler = MemorySampler(read=read, interval_s=1000.0).start()
    peak = sampler.stop()  # one reading at start, one at stop
    assert peak.samples == 2 and peak.peak_bytes == 300 and peak.mean_total_bytes == 200.0
    assert peak.peak is not None and peak.peak.trainer_bytes == 290 and peak.most_workers == 1
    assert MemoryPeak.from_dict(peak.to_dict()) == peak


def test_a_reading_of_this_process_has_its_trainer_first() -> None:
    reading = unique_memory()
    assert reading.processes[0].role is Role.TRAINER and reading.trainer_bytes > 0
    assert "trainer" in reading.describe()


def test_the_reader_reads_the_childrens_private_pages_at_most_once_an_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [0.0]
    reader = UniqueMemoryReader(os.getpid(), children_interval_s=1.0, clock=lambda: now[0])
    calls: list[float] = []

    def read_children() -> int:
        calls.append(now[0])
        return 7 * MB

    monkeypatch.setattr(reader, "_read_children", read_children)
    for now[0] in (0.0, 0.1, 0.5, 0.99, 1.0, 1.5, 2.2):
        used = reader.read()
        assert used is not None and used > 7 * MB  # this process's RSS, the children's kept
    assert calls == [0.0, 1.0, 2.2]
    assert UniqueMemoryReader(2**22 + 12345).read() is None  # no such process


def test_a_costly_reading_of_the_children_spaces_the_next_one_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import types

    from tfperf.probes import unique

    now = [0.0]
    reader = UniqueMemoryReader(os.getpid(), children_interval_s=1.0, clock=lambda: now[0])
    calls: list[float] = []
    monkeypatch.setattr(reader, "_read_children", lambda: calls.append(now[0]) or 0)
    ticks = iter([0.0, 0.2] * 10)  # each reading of the children takes 0.2 s
    monkeypatch.setattr(unique, "time", types.SimpleNamespace(perf_counter=lambda: next(ticks)))
    for now[0] in (0.0, 1.0, 1.9, 2.0, 3.0, 4.0):
        reader.read()
    assert calls == [0.0, 2.0, 4.0]  # at least COST_RATIO x 0.2 s apart, not 1 s
