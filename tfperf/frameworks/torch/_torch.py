"""Every touch of PyTorch's API that depends on its version: one room, pinned by a test.

A `DataLoader` cannot change its arguments once made (it refuses `batch_size`, `sampler` and
`persistent_workers` after `__init__`), so tfperf applies its knobs by making a new one with
the same dataset, sampler and collate function (`rebuild`). `in_order` exists only in newer
torch (2.6 on): `accepts` reads the installed `DataLoader`'s signature, so a knob the
installed torch lacks is never passed to it. Nothing here runs at import: torch loads inside
the functions.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import inspect
from collections.abc import Iterator
from typing import Any

from tfperf.knobs import KNOBS, Knobs, Precision
from tfperf.knobs.choices import StartMethod
from tfperf.knobs.declare import Applier
from tfperf.measure import leaves

#: DataLoader knob -> the `DataLoader` argument that carries it (its declared `option`).
ARGUMENTS: dict[str, str] = {
    knob.name: knob.option for knob in KNOBS.applied_by(Applier.DATALOADER) if knob.option
}
#: Arguments a DataLoader accepts only with worker processes (it raises with `num_workers=0`).
WORKER_ONLY = frozenset(ARGUMENTS[name] for name in KNOBS.where(lambda k: k.needs_workers))
#: Autocast dtypes by precision knob (float32: no autocast).
_AUTOCAST = {Precision.MIXED_BFLOAT16: "bfloat16", Precision.MIXED_FLOAT16: "float16"}


def import_torch() -> Any:
    """Imports torch (its first import takes a second or two)."""
    import torch

    return torch


def is_loader(value: Any) -> bool:
    """Whether `value` is a `torch.utils.data.DataLoader`."""
    from torch.utils.data import DataLoader

    return isinstance(value, DataLoader)


def is_iterable_dataset(dataset: Any) -> bool:
    """Whether `dataset` is a `torch.utils.data.IterableDataset` (read by iterating it)."""
    from torch.utils.data import IterableDataset

    return isinstance(dataset, IterableDataset)


@functools.cache
def accepts(argument: str) -> bool:
    """Whether the installed torch's `DataLoader` takes `argument`."""
    from torch.utils.data import DataLoader

    return argument in inspect.signature(DataLoader.__init__).parameters


def loader_options(loader: Any) -> dict[str, Any]:
    """The DataLoader knobs' values `loader` carries, by knob name."""
    context = loader.multiprocessing_context
    method = context.get_start_method() if context is not None else None
    workers = loader.num_workers
    values = {
        "num_workers": workers,
        "prefetch_factor": loader.prefetch_factor if workers > 0 else None,
        "persistent_workers": bool(loader.persistent_workers),
        "pin_memory": bool(loader.pin_memory),
        "in_order": bool(getattr(loader, "in_order", True)) if accepts("in_order") else None,
        "worker_start_method": StartMethod(method) if method is not None else None,
    }
    return values


def rebuild(loader: Any, knobs: Knobs) -> Any:
    """`loader` made again with the DataLoader knobs that `knobs` sets (None: as it was).

    Arguments that act only with workers are dropped when the loader has none (a
    `DataLoader` refuses them then); `in_order` only where the installed torch takes it.
    Returns `loader` itself when no knob changes it.
    """
    from torch.utils.data import DataLoader, IterableDataset

    wanted = {
        ARGUMENTS[knob.name]: _argument(getattr(knobs, knob.name))
        for knob in KNOBS.applied_by(Applier.DATALOADER)
        if getattr(knobs, knob.name) is not None and accepts(ARGUMENTS[knob.name])
    }
    if not wanted:
        return loader
    arguments = _arguments(loader, DataLoader, IterableDataset)
    arguments.update(wanted)
    if arguments["num_workers"] == 0:
        for name in WORKER_ONLY:
            arguments.pop(name, None)
    return DataLoader(**arguments)


def plain(options: dict[str, Any]) -> dict[str, Any]:
    """`loader_options` as JSON-ready values (the start method by name)."""
    return {name: _argument(value) for name, value in options.items()}


def _argument(value: Any) -> Any:
    return value.value if isinstance(value, StartMethod) else value


def _arguments(loader: Any, loader_class: Any, iterable: Any) -> dict[str, Any]:
    """The arguments that make `loader` again."""
    arguments: dict[str, Any] = {
        "dataset": loader.dataset,
        "num_workers": loader.num_workers,
        "collate_fn": loader.collate_fn,
        "pin_memory": loader.pin_memory,
        "timeout": loader.timeout,
        "worker_init_fn": loader.worker_init_fn,
        "multiprocessing_context": loader.multiprocessing_context,
        "generator": loader.generator,
        "persistent_workers": loader.persistent_workers,
        "pin_memory_device": loader.pin_memory_device,
    }
    if loader.num_workers > 0:
        arguments["prefetch_factor"] = loader.prefetch_factor
    if accepts("in_order"):
        arguments["in_order"] = getattr(loader, "in_order", True)
    if isinstance(loader.dataset, iterable):
        arguments["batch_size"] = loader.batch_size
        arguments["drop_last"] = loader.drop_last
    elif loader.batch_size is not None:  # made from batch_size: its sampler, batched again
        arguments["batch_size"] = loader.batch_size
        arguments["drop_last"] = loader.drop_last
        arguments["sampler"] = loader.sampler
    elif loader.batch_sampler is not None:  # a batch_sampler of the user's: it alone batches
        arguments["batch_sampler"] = loader.batch_sampler
    else:  # batch_size=None: each item is a batch itself
        arguments["batch_size"] = None
        arguments["sampler"] = loader.sampler
    return arguments


class Passes:
    """`loader` as an iterable whose every pass is a new iterator object.

    With `persistent_workers`, `iter(loader)` resets and returns the same iterator each epoch,
    which the step timing loop would take for a one-shot iterator that cannot restart.
    """

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def __iter__(self) -> Iterator[Any]:
        if uses_cuda():
            # A forked worker that collects garbage inherited from the trainer frees its CUDA
            # tensors there, and CUDA aborts the worker: collect it before the pass forks.
            gc.collect()
        yield from self.loader


def epoch_steps(loader: Any) -> int | None:
    """Batches in one pass of `loader`; None when its dataset has no length."""
    try:
        return len(loader)
    except TypeError:
        return None


def uses_cuda() -> bool:
    """Whether this process has started CUDA (a step that moved a batch to a GPU has)."""
    torch = import_torch()
    return bool(torch.cuda.is_available() and torch.cuda.is_initialized())


def reset_allocator_peaks() -> None:
    """Starts the caching allocator's peaks afresh on every GPU, where CUDA is in use.

    A process that has not started CUDA has no peaks yet, and resetting them would start it.
    """
    torch = import_torch()
    if uses_cuda():
        for index in range(torch.cuda.device_count()):
            torch.cuda.reset_peak_memory_stats(index)


def allocator_peaks() -> list[int]:
    """Peak bytes the caching allocator handed out on each GPU, in CUDA's order; empty where
    CUDA is not in use."""
    torch = import_torch()
    if not uses_cuda():
        return []
    return [int(torch.cuda.max_memory_allocated(i)) for i in range(torch.cuda.device_count())]


def synchronise(outputs: Any) -> None:
    """Waits for the GPU's queued work where CUDA is in use; on a CPU the step is done."""
    del outputs  # the step's work is the device's queue, not its outputs
    torch = import_torch()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


@contextlib.contextmanager
def autocast(precision: Precision) -> Iterator[None]:
    """Runs the block under `torch.autocast` for `precision` (float32: as written)."""
    dtype = _AUTOCAST.get(precision)
    if dtype is None:
        yield
        return
    torch = import_torch()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.autocast(device_type=device, dtype=getattr(torch, dtype)):
        yield


def set_threads(threads: int | None) -> None:
    """`torch.set_num_threads(threads)` in this process; None leaves torch's default."""
    if threads is not None:
        import_torch().set_num_threads(threads)


def describe(batch: Any) -> str:
    """A batch's structure in words: `(float32[32, 8], int64[32])`."""
    parts = []
    for leaf in leaves(batch):
        dtype, shape = getattr(leaf, "dtype", None), getattr(leaf, "shape", None)
        if dtype is None or shape is None:
            parts.append(type(leaf).__name__)
            continue
        name = str(dtype).removeprefix("torch.")
        parts.append(f"{name}[{', '.join(str(int(size)) for size in shape)}]")
    return f"({', '.join(parts)})" if len(parts) != 1 else parts[0]


def forget_iterator(loader: Any, iterator: Any) -> None:
    """Lets a persistent `loader` drop `iterator`, its kept one, once its workers are shut
    down: its next `iter(loader)` then starts new workers rather than reusing stopped ones."""
    if getattr(loader, "_iterator", None) is iterator:
        loader._iterator = None
