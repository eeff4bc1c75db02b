"""Per-item and collate timing of a Dataset, by source line, and the Little's-law worker count."""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest

from tfperf.frameworks.torch._items import ItemTiming, time_items, workers_for

torch = pytest.importorskip("torch")


class Blocking(torch.utils.data.Dataset):  # type: ignore[misc,name-defined]
    """Each item waits 2 ms (a read) and computes nothing."""

    def __len__(self) -> int:
        return 100

    def __getitem__(self, index: int) -> Any:
        time.sleep(0.002)
        return torch.tensor([index])


class Lines(torch.utils.data.IterableDataset):  # type: ignore[misc,name-defined]
    def __iter__(self) -> Any:
        return iter([torch.zeros(2)] * 5)


def test_a_blocking_item_reads_as_blocking_and_names_its_line() -> None:
    timing = time_items(Blocking(), count=12, batch_size=4)
    assert timing.items == 12
    assert timing.batches == 3
    assert timing.wall_s_per_item >= 0.002
    assert timing.blocks
    assert timing.item_function == "Blocking.__getitem__"
    line = Blocking.__getitem__.__code__.co_firstlineno
    assert timing.item_where == f"test_items.py:{line}"
    assert timing.collate_function == "default_collate"
    assert timing.collate_where is not None and timing.collate_where.startswith("torch/")
    assert "(blocking" in timing.describe()[0]


def test_an_item_of_a_library_wrapper_is_named_where_the_user_wrote_it() -> None:
    # random_split hands the loader torch's Subset, ConcatDataset joins datasets: the item
    # that costs is the user's, named by the first of the user's functions a fetch calls.
    split, _ = torch.utils.data.random_split(Blocking(), [0.5, 0.5])
    joined = torch.utils.data.ConcatDataset([Blocking(), Blocking()])
    line = Blocking.__getitem__.__code__.co_firstlineno
    for wrapped in (split, joined):
        timing = time_items(wrapped, count=2, batch_size=2)
        assert timing.item_function == "Blocking.__getitem__"
        assert timing.item_where == f"test_items.py:{line}"
        assert timing.wall_s_per_item >= 0.002
    # A library's dataset that calls none of the user's datasets keeps its own name.
    tensors = torch.utils.data.TensorDataset(torch.zeros(4, 2))
    timing = time_items(tensors, count=2, batch_size=2)
    assert timing.item_function == "TensorDataset.__getitem__"
    assert timing.item_where is not None and timing.item_where.startswith("torch/")


def test_times_exactly_on_fake_clocks_and_round_trips() -> None:
    ticks = itertools.count()

    def wall() -> float:
        return float(next(ticks))  # each reading one second later

    def collate(items: list[Any]) -> list[Any]:
        return items

    timing = time_items(Lines(), collate, count=10, batch_size=2, clock=wall, cpu_clock=lambda: 0.0)
    assert timing.items == 5  # the iterable ran out first
    assert timing.item_function == "Lines.__iter__"
    assert timing.wall_s_per_item == 1.0 and timing.cpu_s_per_item == 0.0
    assert timing.batches == 2 and timing.collate_wall_s_per_batch == 1.0
    assert timing.collate_function.endswith("collate")
    line = collate.__code__.co_firstlineno
    assert timing.collate_where == f"test_items.py:{line}"
    assert ItemTiming.from_dict(timing.to_dict()) == timing


def test_a_time_limit_stops_fetching_after_the_first_item() -> None:
    ticks = itertools.count()
    timing = time_items(
        Blocking(),
        count=50,
        batch_size=4,
        max_seconds=3.0,
        clock=lambda: float(next(ticks)),
        cpu_clock=lambda: 0.0,
    )
    assert timing.items == 1  # the limit read 0, the item 1-2, the check 3: out of time


def test_workers_follow_littles_law_capped_by_the_cores() -> None:
    blocking = ItemTiming(8, 0.002, 0.0001, 0.002, "D.__getitem__", None, batch_size=1)
    assert workers_for(blocking, 2000.0, cores=2) == 4  # 2000/s x 2 ms in flight
    assert workers_for(blocking, 1e6, cores=2) == 40  # two cores, 20 workers each
    computing = ItemTiming(8, 0.002, 0.002, 0.002, "D.__getitem__", None, batch_size=1)
    assert not computing.blocks
    assert workers_for(computing, 1e6, cores=2) == 2  # one per core: more only queue
    assert workers_for(computing, 0.0, cores=2) == 1


def test_the_estimate_rounds_to_the_counts_a_search_tries_and_stops_computing_items_at_the_cores():
    from tfperf.frameworks.torch._limit import estimate_workers

    blocking = ItemTiming(8, 0.002, 0.0001, 0.002, "D.__getitem__", None, batch_size=1)
    assert estimate_workers(blocking, 2000.0, cores=2) == 8  # 2 x 4 in flight
    # Wall a hair above CPU (a measured computing item): 3 workers by the cores' rule, a power
    # of two above it, yet a third worker on two cores only queues.
    computing = ItemTiming(8, 0.00101, 0.001, 0.00101, "D.__getitem__", None, batch_size=1)
    assert workers_for(computing, 1e6, cores=2) == 3
    assert estimate_workers(computing, 1e6, cores=2) == 2
    assert estimate_workers(computing, 1e6, cores=6) == 6


def test_bad_counts_state_the_rule() -> None:
    with pytest.raises(ValueError, match="count >= 1"):
        time_items(Blocking(), count=0, batch_size=1)
