"""Time per item in a `Dataset` and per batch in its `collate_fn`, named by source line.

A `DataLoader` worker fetches items one at a time (`dataset[i]`, or `next()` on an
`IterableDataset`'s iterator) and collates each batch's items with `collate_fn`. Timing both
here, in this process, tells the two usual causes of a slow loader apart:

- an item whose wall time is far above its CPU time *blocks* (a read from disk or network, a
  sleep): more workers help far past the number of cores, since a blocked worker uses none;
- an item whose wall time is about its CPU time *computes* (decoding, augmenting): workers
  beyond the cores only queue.

CPU time is the calling thread's (`time.thread_time`), so work another thread does for the
item is not counted: a `Dataset` that hands its work to a thread pool reads as blocking.

Items are named where the user wrote them: a dataset whose method is a library's (a `Subset`
that `random_split` made, a `ConcatDataset`) is named by the user's dataset method of the same
name that one fetch calls (`_own_item_function`), the library's own where it calls none.

Interface (the framework calls these):

- `time_items(dataset, collate_fn=None, *, count, batch_size) -> ItemTiming`;
- `workers_for(item, target_examples_per_sec, *, cores=None) -> int`, Little's law.

torch is imported inside functions.

Example:
    >>> timing = time_items(dataset, count=64, batch_size=16)  # doctest: +SKIP
    >>> timing.describe()  # doctest: +SKIP
    ['items: 2.1 ms wall, 0.05 ms CPU each (blocking) in ImageFiles.__getitem__ (data.py:14)', ...]
    >>> workers_for(timing, 2000.0)  # doctest: +SKIP
    5
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import os
import sys
import sysconfig
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tfperf.results import JsonRecord

#: An item blocks when its wall time is at least this many times its CPU time: half the
#: time or more spent waiting, not computing.
BLOCKING_RATIO = 2.0
#: The most workers `workers_for` proposes: each worker is a process with its own memory.
MAX_WORKERS = 64

Clock = Callable[[], float]


@dataclasses.dataclass(frozen=True)
class ItemTiming(JsonRecord):
    """Per-item and per-batch costs of a `Dataset` and its `collate_fn`, measured in-process.

    Attributes:
        items: items timed.
        wall_s_per_item: mean wall seconds to fetch one item.
        cpu_s_per_item: mean CPU seconds (this thread's) to fetch one item.
        max_wall_s: the slowest item's wall seconds (the first often pays a lazy open).
        item_function: what fetched the items: `ImageFiles.__getitem__`, `Lines.__iter__`.
        item_where: where it is defined, `data.py:14` (a library file from its package on,
            `torchvision/datasets/folder.py:229`); None when inspect cannot tell.
        batch_size: items per collated batch.
        batches: batches collated (0 when no item was fetched).
        collate_wall_s_per_batch: mean wall seconds of one `collate_fn` call; None: no batch.
        collate_cpu_s_per_batch: its CPU seconds; None: no batch.
        collate_function: the collate function's name (`default_collate` when none is given).
        collate_where: where it is defined, as `item_where`.
    """

    items: int
    wall_s_per_item: float
    cpu_s_per_item: float
    max_wall_s: float
    item_function: str
    item_where: str | None
    batch_size: int
    batches: int = 0
    collate_wall_s_per_batch: float | None = None
    collate_cpu_s_per_batch: float | None = None
    collate_function: str = "default_collate"
    collate_where: str | None = None

    @property
    def blocks(self) -> bool:
        """Whether loading an item (with its share of collate) mostly waits
        (`BLOCKING_RATIO`) rather than computes."""
        return self.wall_s_per_example >= BLOCKING_RATIO * max(self.cpu_s_per_example, 1e-9)

    @property
    def wall_s_per_example(self) -> float:
        """Wall seconds one worker spends per example: its item plus its share of collate."""
        collate = (self.collate_wall_s_per_batch or 0.0) / max(self.batch_size, 1)
        return self.wall_s_per_item + collate

    @property
    def cpu_s_per_example(self) -> float:
        """CPU seconds per example: its item plus its share of collate."""
        collate = (self.collate_cpu_s_per_batch or 0.0) / max(self.batch_size, 1)
        return self.cpu_s_per_item + collate

    def describe(self) -> list[str]:
        """Lines for a terminal: the items, then the collate function."""
        kind = "blocking: more workers than cores help" if self.blocks else "computing"
        where = f" ({self.item_where})" if self.item_where else ""
        lines = [
            f"items: {_ms(self.wall_s_per_item)} wall, {_ms(self.cpu_s_per_item)} CPU each "
            f"({kind}) in {self.item_function}{where}"
        ]
        if self.collate_wall_s_per_batch is not None:
            where = f" ({self.collate_where})" if self.collate_where else ""
            lines.append(
                f"collate: {_ms(self.collate_wall_s_per_batch)} wall, "
                f"{_ms(self.collate_cpu_s_per_batch or 0.0)} CPU per batch of "
                f"{self.batch_size} in {self.collate_function}{where}"
            )
        return lines

    @classmethod
    def from_dict(cls, data: Any) -> ItemTiming:
        """Rebuilds a timing from `to_dict` output (`ResultFileError` if it is not one)."""
        return cls.validate(data)


def time_items(
    dataset: Any,
    collate_fn: Callable[[list[Any]], Any] | None = None,
    *,
    count: int,
    batch_size: int,
    max_seconds: float | None = None,
    clock: Clock = time.perf_counter,
    cpu_clock: Clock = time.thread_time,
) -> ItemTiming:
    """Fetches `count` items of `dataset` in this process, timing each, then collates them.

    A map-style dataset is indexed `dataset[0]`, `dataset[1]`, ... (fewer when it is shorter);
    an `IterableDataset` (anything without `__getitem__` and with `__iter__`) is iterated.
    The items fetched are then collated `batch_size` at a time (a last, shorter batch only
    when no full batch was made) with `collate_fn`, or torch's `default_collate` when None.

    Args:
        count: items to fetch (>= 1).
        batch_size: items per collated batch (>= 1), the loader's `batch_size`.
        max_seconds: stop fetching once this much wall time has gone (after at least one
            item), so a slow dataset costs a bounded time; None: fetch `count` items.
        clock, cpu_clock: wall and CPU clocks in seconds; injectable for tests.

    Raises:
        ValueError: `count` or `batch_size` is below 1.
    """
    if count < 1 or batch_size < 1:
        raise ValueError(
            f"`count >= 1 and batch_size >= 1` must hold, but got {count=}, {batch_size=}"
        )
    function, fetch = _fetcher(dataset)
    function, where = _own_item_function(dataset, function)
    items: list[Any] = []
    walls: list[float] = []
    cpus: list[float] = []
    deadline = clock() + max_seconds if max_seconds is not None else None
    for _ in range(count):
        if deadline is not None and walls and clock() >= deadline:
            break
        wall, cpu = clock(), cpu_clock()
        try:
            item = next(fetch)
        except StopIteration:
            break
        cpus.append(cpu_clock() - cpu)  # read inside the wall interval: never above it
        walls.append(clock() - wall)
        items.append(item)
    collate = collate_fn if collate_fn is not None else _default_collate()
    batch_walls, batch_cpus = _time_collate(collate, items, batch_size, clock, cpu_clock)
    return ItemTiming(
        items=len(walls),
        wall_s_per_item=_mean(walls),
        cpu_s_per_item=_mean(cpus),
        max_wall_s=max(walls, default=0.0),
        item_function=function,
        item_where=where,
        batch_size=batch_size,
        batches=len(batch_walls),
        collate_wall_s_per_batch=_mean(batch_walls) if batch_walls else None,
        collate_cpu_s_per_batch=_mean(batch_cpus) if batch_cpus else None,
        collate_function=_name(collate),
        collate_where=_where(collate),
    )


def workers_for(
    item: ItemTiming, target_examples_per_sec: float, *, cores: int | None = None
) -> int:
    """The number of workers that keeps `target_examples_per_sec` examples coming.

    The rule, Little's law: a worker holds one example for `W` seconds of wall time (its item
    plus its share of collate, `ItemTiming.wall_s_per_example`), so delivering `λ` examples/s
    takes `λ * W` examples in flight, one per worker: `ceil(λ * W)` workers. CPU caps it: each
    example costs `C` CPU seconds (`cpu_s_per_example`), so `cores` cores finish at most
    `cores / C` examples/s, which `ceil(cores * W / C)` workers already reach; more only
    queue for the cores. A blocking item (W >> C) is therefore given many workers per core,
    a computing one (W ≈ C) about one per core. The answer is at least 1 and at most
    `MAX_WORKERS`.

    Args:
        target_examples_per_sec: the rate to feed, e.g. the training step's compute-only rate.
        cores: CPU cores the workers may use; None: those this process may run on.

    Example:
        >>> timing = ItemTiming(items=8, wall_s_per_item=0.002, cpu_s_per_item=0.0001,
        ...                     max_wall_s=0.002, item_function="D.__getitem__",
        ...                     item_where=None, batch_size=1)
        >>> workers_for(timing, 2000.0, cores=2)
        4
        >>> workers_for(timing, 1e6, cores=2)
        40
    """
    wall = item.wall_s_per_example
    if wall <= 0 or target_examples_per_sec <= 0:
        return 1
    wanted = math.ceil(target_examples_per_sec * wall - 1e-9)
    cpu = item.cpu_s_per_example
    if cpu > 0:
        wanted = min(wanted, math.ceil((cores or _cores()) * wall / cpu - 1e-9))
    return max(1, min(wanted, MAX_WORKERS))


def _fetcher(dataset: Any) -> tuple[str, Iterator[Any]]:
    """What fetches items ("Cls.__getitem__" or "Cls.__iter__") and an iterator over them."""
    cls = type(dataset).__name__
    if hasattr(type(dataset), "__getitem__") and not _is_iterable_dataset(dataset):
        try:
            length = len(dataset)
        except TypeError:
            length = None
        indices = range(length) if length is not None else _naturals()
        return f"{cls}.__getitem__", (dataset[index] for index in indices)
    return f"{cls}.__iter__", iter(dataset)


def _own_item_function(dataset: Any, function: str) -> tuple[str, str | None]:
    """`function` (`Cls.__getitem__`) and where it is defined; where that is a library's, the
    first method of the same name outside libraries that fetching one item calls, and where
    that is defined (the dataset's own method where none is called, or the fetch fails)."""
    method = getattr(type(dataset), function.rpartition(".")[2], None)
    target = _unwrapped(method)
    code = getattr(target, "__code__", None)
    if code is None or not _in_library(code.co_filename):
        return function, _where(method)
    protocol = function.rpartition(".")[2]
    own = _first_own_call(lambda: next(_fetcher(dataset)[1]), protocol)
    if own is None:
        return function, _where(method)
    name = getattr(own, "co_qualname", own.co_name)
    return name, f"{_shown_path(own.co_filename)}:{own.co_firstlineno}"


def _first_own_call(fetch: Callable[[], Any], protocol: str) -> types.CodeType | None:
    """The code of the first `protocol` method (`__getitem__`, `__iter__`) outside libraries
    that `fetch()` calls: the user's dataset behind a library's wrapper, not a transform the
    library's own dataset calls back. None if none is called, or `fetch` raises (the timing
    then says what went wrong)."""
    found: list[types.CodeType] = []

    def hook(frame: types.FrameType, event: str, _arg: Any) -> None:
        code = frame.f_code
        named = event == "call" and code.co_name == protocol
        if not found and named and not _in_library(code.co_filename):
            found.append(code)

    previous = sys.getprofile()
    sys.setprofile(hook)
    try:
        fetch()
    except Exception:  # the timed fetches meet it again and say so
        return None
    finally:
        sys.setprofile(previous)
    return found[0] if found else None


def _in_library(filename: str) -> bool:
    """Whether `filename` is Python's own, an installed package's (tfperf's included) or not
    a file at all (`<frozen ...>`)."""
    if filename.startswith("<"):
        return True
    path = os.path.realpath(filename)
    return any(path.startswith(root + os.sep) for root in _library_roots())


@functools.lru_cache(maxsize=1)
def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    roots.add(str(Path(__file__).parents[2]))  # tfperf itself
    return tuple(os.path.realpath(root) for root in roots)


def _naturals() -> Iterator[int]:
    index = 0
    while True:
        yield index
        index += 1


def _is_iterable_dataset(dataset: Any) -> bool:
    from torch.utils.data import IterableDataset

    return isinstance(dataset, IterableDataset)


def _default_collate() -> Callable[[list[Any]], Any]:
    from torch.utils.data import default_collate

    return default_collate


def _time_collate(
    collate: Callable[[list[Any]], Any],
    items: list[Any],
    batch_size: int,
    clock: Clock,
    cpu_clock: Clock,
) -> tuple[list[float], list[float]]:
    starts = range(0, len(items) - batch_size + 1, batch_size) if len(items) >= batch_size else []
    batches = [items[at : at + batch_size] for at in starts] or ([items] if items else [])
    walls, cpus = [], []
    for batch in batches:
        wall, cpu = clock(), cpu_clock()
        collate(batch)
        cpus.append(cpu_clock() - cpu)
        walls.append(clock() - wall)
    return walls, cpus


def _where(function: Any) -> str | None:
    """`file.py:LINE` of a function's definition (a library's from its package on)."""
    target = _unwrapped(function)
    if target is None:
        return None
    try:
        filename = inspect.getsourcefile(target)
        _, line = inspect.getsourcelines(target)
    except (OSError, TypeError):
        return None
    if filename is None:
        return None
    return f"{_shown_path(filename)}:{line}"


def _unwrapped(function: Any) -> Any:
    """The plain function behind a partial, a decorator or a callable object."""
    while isinstance(function, functools.partial):
        function = function.func
    if function is None:
        return None
    if not (inspect.isfunction(function) or inspect.ismethod(function)):
        function = type(function).__call__ if callable(function) else None
    try:
        return inspect.unwrap(function) if function is not None else None
    except ValueError:  # a cycle of __wrapped__
        return function


def _shown_path(filename: str) -> str:
    """A user's file by its name; a library file from its package on (after site-packages)."""
    parts = Path(os.path.realpath(filename)).parts
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            return "/".join(parts[parts.index(marker) + 1 :])
    return parts[-1]


def _name(function: Any) -> str:
    while isinstance(function, functools.partial):
        function = function.func
    return getattr(function, "__qualname__", None) or type(function).__name__


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"
