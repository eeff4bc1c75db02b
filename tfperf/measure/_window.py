"""How long a phase is measured: the steps asked for, at least a multiple of what is buffered,
and never past the profile's time budget.

A prefetch buffer fills while the first steps are slow (tracing, warm-up) and is served inside
the measured window: a window of N steps behind a buffer of B batches can read up to N / (N - B)
times the steady rate, which flatters deep buffers in short windows.
So a phase measures at least `BUFFER_MULTIPLE` times the batches the pipeline's output buffers,
whatever `steps` says; the time floor is the profiler's `min_seconds`.

A profile has a time budget (`DEFAULT_BUDGET_S`; `tfperf profile --budget`). Each of the three
phases may take `PHASE_SHARE` of it and the stage analysis `STAGE_SHARE`: once a phase has run
its share, it ends with the steps measured so far (at least `MIN_BUDGET_STEPS`), so its window
is sized by the measured step time, not by the steps the buffers ask for. A deep prefetch of
slow steps is then measured over fewer steps, and the result says the budget cut it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from tfperf.frameworks import StageNode
from tfperf.results.stages import StageKind, StageUnit

#: Measured steps per buffered batch: the buffer's content is at most a tenth of the window.
BUFFER_MULTIPLE = 10

#: What a `prefetch(AUTOTUNE)` counts as. tf.data starts its buffer at one element and grows it
#: only when the consumer finds it empty, so it holds little when a window starts.
AUTOTUNE_DEPTH = 1


#: A profile's default time budget, seconds: start-up (importing the framework, building the
#: model) comes on top.
DEFAULT_BUDGET_S = 120.0
#: Share of the budget each of the three phases may take, warm-up included.
PHASE_SHARE = 0.25
#: Share of the budget the stage analysis may take.
STAGE_SHARE = 0.2
#: A phase the budget ends still measures at least this many steps: a figure needs some.
MIN_BUDGET_STEPS = 5


@dataclasses.dataclass(frozen=True)
class Budget:
    """A profile's time budget and the share of it each part may take.

    Attributes:
        seconds: the budget, seconds; None (or 0): none.
    """

    seconds: float | None = DEFAULT_BUDGET_S

    def __post_init__(self) -> None:
        if self.seconds is not None and self.seconds < 0:
            raise ValueError(f"`budget >= 0` must hold, but got seconds={self.seconds}")

    @property
    def phase_s(self) -> float | None:
        """The longest one phase may run, warm-up included; None: no limit."""
        return PHASE_SHARE * self.seconds if self.seconds else None

    def stages_s(self, default_s: float) -> float:
        """The stage analysis's budget: its share, never above its own `default_s`."""
        return min(default_s, STAGE_SHARE * self.seconds) if self.seconds else default_s


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
