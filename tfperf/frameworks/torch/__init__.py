"""The PyTorch implementation of `tfperf.frameworks.Framework` (a `DataLoader`).

A pipeline file defines `make_loader(knobs)` returning a `torch.utils.data.DataLoader` and
`make_train_step(knobs)` returning the callable run on each batch, with `BASELINE` and
`SEARCH_SPACE` as for tf.data. tfperf applies the DataLoader knobs (`num_workers`,
`prefetch_factor`, `persistent_workers`, `pin_memory`, `in_order`, the worker start method)
by making the loader again with them, sets the trainer's threads (`torch_threads`) and runs
the step under autocast (`mixed_precision`). The registry imports this module lazily
(`tfperf.frameworks.get("torch")`); torch itself loads only inside the functions that build
or measure. Every touch of torch's version-dependent API is in `_torch`.

An ordinary training script with its own loop over a `DataLoader` is measured as it runs
(`_script`: the step clock taken from the loader's iterator), its `DataLoader(...)` calls found
and patched as call sites (`_sites`); the items are timed by `_items` and the host RAM of the
trainer and its workers sampled by `tfperf.probes.MemorySampler`, shared pages counted once.
Where the step uses CUDA, one batch's copy to the GPU is timed pageable and pinned by `_copy`.
"""

from __future__ import annotations

from tfperf.frameworks.torch._framework import (
    FRAMEWORK,
    Torch,
)
from tfperf.frameworks.torch._limit import (
    estimate_workers,
    loader_limit,
)

__all__ = [
    "FRAMEWORK",
    "Torch",
    "estimate_workers",
    "loader_limit",
]
