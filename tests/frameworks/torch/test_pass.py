"""The checked pass on real DataLoaders with real workers: a stream every worker reads whole is
named with its fix, a sharded one is not; a dataset of Python objects grows its workers'
private memory over a pass, one held in a numpy array does not."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from tests.clean_process import in_clean_process
from tfperf.frameworks.torch._pass import check_pass, fingerprints, repeat_factor
from tfperf.results._loader_checks import GROWTH_NOISE_BYTES, ITERABLE_DOCS

torch = pytest.importorskip("torch")
data = torch.utils.data


class Unsharded(data.IterableDataset):  # type: ignore[misc,name-defined]
    """Every worker yields the whole stream: no `get_worker_info()`."""

    def __iter__(self) -> Any:
        return (torch.tensor([float(i)]) for i in range(48))


class Sharded(data.IterableDataset):  # type: ignore[misc,name-defined]
    """Each worker yields every `num_workers`-th item from its `id` on."""

    def __iter__(self) -> Any:
        info = data.get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return (torch.tensor([float(i)]) for i in range(start, 48, step))


class Endless(data.IterableDataset):  # type: ignore[misc,name-defined]
    """An unsharded stream with no end: only the sample can tell its copies apart."""

    def __iter__(self) -> Any:
        return (torch.tensor([float(i)]) for i in itertools.count())


#: Rows enough that the copy of their pages in each worker is well above the noise.
ROWS = 400_000


class Objects(data.Dataset):  # type: ignore[misc,name-defined]
    """Rows held as Python dicts: reading one writes its reference count."""

    def __init__(self) -> None:
        self.rows = [{"x": i, "y": [i]} for i in range(ROWS)]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> Any:
        return self.rows[index]["x"]


class Arrays(data.Dataset):  # type: ignore[misc,name-defined]
    """The same rows in one numpy array: reading one writes nothing."""

    def __init__(self) -> None:
        self.rows = np.arange(ROWS)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> Any:
        return self.rows[index]


@in_clean_process
def test_a_stream_every_worker_reads_whole_is_named_with_the_fix() -> None:
    checked = check_pass(data.DataLoader(Unsharded(), batch_size=4, num_workers=2))

    check = checked.pass_check
    assert check is not None and check.complete and check.reference_complete
    assert (check.examples, check.reference_examples, check.ratio) == (96, 48, 2.0)
    assert check.repeat_factor == 2.0 and check.changes_data
    statement = check.statement()
    assert statement is not None
    assert statement.startswith("`Unsharded` is an IterableDataset that every worker reads whole")
    assert (
        "under num_workers=2 a pass yields 2x the examples of one pass (96 against 48 read once "
        "in the trainer): duplicates"
    ) in statement
    assert "torch.utils.data.get_worker_info()" in statement and ITERABLE_DOCS in statement
    assert checked.first_batch is not None


@in_clean_process
def test_a_sharded_stream_is_not_flagged() -> None:
    check = check_pass(data.DataLoader(Sharded(), batch_size=4, num_workers=2)).pass_check

    assert check is not None
    assert (check.examples, check.reference_examples, check.ratio) == (48, 48, 1.0)
    assert check.repeat_factor == 1.0
    assert not check.changes_data and check.statement() is None


class _Ticks:
    """A clock that moves 1 ms at each reading: an endless pass ends after a set number of
    batches, however slowly its workers start (on a CI host running the suite on every core,
    a 0.5 s wall-clock pass once sampled one batch, too few to see a repeat)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 0.001
        return self.now


@in_clean_process
def test_an_endless_stream_is_caught_by_its_repeats() -> None:
    loader = data.DataLoader(Endless(), batch_size=8, num_workers=2)
    check = check_pass(loader, max_seconds=1.0, clock=_Ticks()).pass_check

    assert check is not None and not check.complete and check.ratio is None
    assert check.repeat_factor is not None and check.repeat_factor >= 1.5
    statement = check.statement()
    assert statement is not None and "the examples recur" in statement
    assert "get_worker_info" in statement


@in_clean_process
def test_a_map_dataset_is_not_compared_and_no_workers_check_nothing() -> None:
    assert check_pass(data.DataLoader(Arrays(), batch_size=4096, num_workers=1)).pass_check is None
    checked = check_pass(data.DataLoader(Unsharded(), batch_size=4))
    assert checked.pass_check is None and checked.memory is None


@in_clean_process
def test_python_objects_grow_each_worker_and_a_numpy_array_does_not() -> None:
    def memory(dataset: Any) -> Any:
        loader = data.DataLoader(dataset, batch_size=2000, num_workers=2, shuffle=True)
        checked = check_pass(loader, max_seconds=30.0)
        assert checked.memory is not None
        return checked.memory

    objects, arrays = memory(Objects()), memory(Arrays())
    for read in (objects, arrays):
        assert read.workers == 2 and read.complete and read.pass_batches == ROWS // 2000
        assert read.batches == read.pass_batches - 1  # from the first batch to the last
        assert read.shm_total_bytes is None or read.shm_end_bytes is not None
    assert objects.growth_per_worker_bytes > arrays.growth_per_worker_bytes + GROWTH_NOISE_BYTES
    assert objects.grows and not arrays.grows
    statement = objects.statement("Objects")
    assert statement is not None and "copies `Objects`'s pages" in statement
    assert "numpy arrays or a memory-mapped file" in statement
    assert arrays.statement("Arrays") is None


def test_an_example_has_one_fingerprint_wherever_it_sits_in_a_batch() -> None:
    first = (torch.tensor([[1.0, 2.0], [3.0, 4.0]]), torch.tensor([7, 8]))
    second = (torch.tensor([[3.0, 4.0], [5.0, 6.0]]), torch.tensor([8, 9]))
    assert fingerprints(first)[1] == fingerprints(second)[0]
    assert len(set(fingerprints(first) + fingerprints(second))) == 3
    assert repeat_factor([b"a"] * 4, [b"a", b"b", b"c", b"d"]) == 4.0
    assert repeat_factor([b"a"], [b"a"]) is None
