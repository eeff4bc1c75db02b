"""Builds a PyTorch pipeline file for knobs: its DataLoader, rebuilt with the knobs, and its step.

The file's `make_loader(knobs)` returns a `DataLoader` and `make_train_step(knobs)` a callable
run on one batch. tfperf applies the DataLoader knobs (`num_workers`, `prefetch_factor`, ...)
by making the loader again with them (`_torch.rebuild`); `torch_threads` sets the trainer's
operator threads and `mixed_precision` runs the step under `torch.autocast`. The file itself
reads only what it must build with, such as `knobs.batch_size`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from tfperf.errors import PipelineFileError
from tfperf.frameworks.torch import _torch
from tfperf.knobs import Knobs
from tfperf.pipeline import PipelineFile


@dataclasses.dataclass(frozen=True)
class Built:
    """A pipeline built for one set of knobs: the loader as it runs, and the step."""

    loader: Any
    step: Callable[[Any], Any]


def build(pipeline: PipelineFile, knobs: Knobs) -> Built:
    """Calls the file's functions under `knobs` and applies the knobs tfperf applies itself.

    Raises:
        PipelineFileError: `make_loader` returns no DataLoader, the file has no
            `make_train_step`, or the step it returns is not callable.
    """
    name = pipeline.path.name
    make_loader, make_step = pipeline.make_dataset, pipeline.make_train_step
    if make_loader is None:  # a training script: it builds its loader as it runs
        raise PipelineFileError(
            f"{name} is a training script: tfperf measures it as it runs (`tfperf profile "
            f"{name}`), and builds a DataLoader only from a pipeline file's `make_loader`."
        )
    _torch.set_threads(knobs.torch_threads)
    if make_step is None:
        raise PipelineFileError(
            f"{name} defines no `make_train_step`; tfperf calls `make_train_step(knobs)` for "
            "the callable it runs on each batch the DataLoader yields (one optimizer step). "
            "Define it, e.g. `def make_train_step(knobs): return lambda batch: step(model, batch)`."
        )
    loader = pipeline.call(make_loader, knobs)
    if not _torch.is_loader(loader):
        raise PipelineFileError(
            f"{name}: `make_loader` returned a {type(loader).__name__}, not a "
            "torch.utils.data.DataLoader. Return "
            "the DataLoader itself, e.g. `return DataLoader(dataset, batch_size=knobs.batch_size)`."
        )
    user_step = pipeline.call(make_step, knobs)
    if not callable(user_step):
        raise PipelineFileError(
            f"{name}: `make_train_step` returned a {type(user_step).__name__}, not a callable; "
            "return the function tfperf runs on each batch (e.g. a closure over the model)."
        )
    precision = knobs.mixed_precision

    def step(batch: Any) -> Any:
        with _torch.autocast(precision):
            return user_step(batch)

    rebuilt = _torch.rebuild(loader, knobs)
    check_importable_by_workers(rebuilt, pipeline)
    return Built(loader=rebuilt, step=step)


#: Start methods whose workers are fresh interpreters: they import what they unpickle.
_FRESH_STARTS = frozenset({"spawn", "forkserver"})


def check_importable_by_workers(loader: Any, pipeline: PipelineFile) -> None:
    """Refuses, before anything runs, a loader whose spawned workers could not import its
    dataset: they die at start, and torch says only "exited unexpectedly".

    A spawned (or forkserver) worker is a fresh interpreter that unpickles the dataset, its
    sampler, `collate_fn` and `worker_init_fn`, importing each one's module by name. A class
    defined in the pipeline file lives in the private module tfperf loaded it as; one in a
    sibling module is importable only while tfperf calls the file's functions (its folder
    is on `sys.path` then, not when the workers start).

    Raises:
        PipelineFileError: naming the start method, the object, its module and the fixes.
    """
    import importlib.machinery
    import multiprocessing
    import sys

    context = loader.multiprocessing_context
    # Without a context of its own, the workers start as the process's default does:
    # `set_start_method`'s, else the platform's (forkserver on Linux from Python 3.14).
    default = multiprocessing.get_start_method(allow_none=True)
    default = default or multiprocessing.get_all_start_methods()[0]
    method = context.get_start_method() if context is not None else default
    if loader.num_workers == 0 or method not in _FRESH_STARTS:
        return
    parts = (loader.dataset, loader.sampler, loader.collate_fn, loader.worker_init_fn)
    for part in parts:
        if part is None:
            continue
        made = part if callable(part) and hasattr(part, "__qualname__") else type(part)
        module = getattr(made, "__module__", None) or ""
        top = module.partition(".")[0]
        if top in sys.builtin_module_names or top in sys.stdlib_module_names:
            continue
        if importlib.machinery.PathFinder.find_spec(top, sys.path) is not None:
            continue
        chosen = context is not None
        message = _unimportable(pipeline, method, made.__qualname__, module, chosen, default)
        raise PipelineFileError(message)


def _unimportable(
    pipeline: PipelineFile, method: str, name: str, module: str, chosen: bool, default: str
) -> str:
    """The refusal: `chosen` whether the loader set `method` itself; `default` the method the
    process starts workers with otherwise."""
    starts = (
        f"worker_start_method {method!r}"
        if chosen
        else f"This process's start method, {method!r} (set_start_method's or the platform's),"
    )
    unset = " or leave it unset" if chosen and default == "fork" else ""
    where = (
        f"it is defined in {pipeline.path.name}, which tfperf imports under a private name"
        if pipeline.module is not None and module == pipeline.module.__name__
        else f"its module {module!r} is not on the path a fresh interpreter starts with"
    )
    return (
        f"{pipeline.path.name}: {starts} starts each DataLoader worker as a fresh interpreter "
        f"that imports {name} again, and it could not: {where}, so every worker would die at "
        f"start. Set worker_start_method 'fork'{unset}; or move {name} into a package "
        "installed in this environment (`pip install -e .`) or on PYTHONPATH, so that any "
        "interpreter imports it."
    )
