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

    return Built(loader=_torch.rebuild(loader, knobs), step=step)
