"""How long a phase is measured: the steps asked for, at least a multiple of what is buffered.

A prefetch buffer fills while the first steps are slow (tracing, warm-up) and is served inside
the measured window: a window of N steps behind a buffer of B batches can read up to N / (N - B)
times the steady rate, which flatters deep buffers in short windows.
So a phase measures at least `BUFFER_MULTIPLE` times the batches the pipeline's output buffers,
whatever `steps` says; the time floor is the profiler's `min_seconds`.
"""

from __future__ import annotations

from collections.abc import Sequence

from tfperf.frameworks import StageNode
from tfperf.results.stages import StageKind, StageUnit

#: Measured steps per buffered batch: the buffer's content is at most a tenth of the window.
BUFFER_MULTIPLE = 10

#: What a `prefetch(AUTOTUNE)` counts as. tf.data starts its buffer at one element and grows it
#: only when the consumer finds it empty, so it holds little when a window starts.
AUTOTUNE_DEPTH = 1


def buffered_batches(stages: Sequence[StageNode]) -> int:
    """Batches the pipeline's prefetch stages hold at most (AUTOTUNE as `AUTOTUNE_DEPTH`).

    Only buffers of whole batches count: one of examples ahead of a batch holds a fraction of
    one batch per element.
    """
    total = 0
    for stage in stages:
        if stage.kind is not StageKind.PREFETCH or stage.unit is not StageUnit.BATCH:
            continue
        size = stage.parameters.get("buffer_size")
        if isinstance(size, bool) or not isinstance(size, int):
            continue
        total += AUTOTUNE_DEPTH if size < 0 else size
    return total


def window_steps(steps: int, stages: Sequence[StageNode]) -> int:
    """`steps`, raised to `BUFFER_MULTIPLE` times the batches the pipeline buffers."""
    return max(steps, BUFFER_MULTIPLE * buffered_batches(stages))
