"""The shapes a training loop's batches come in, and a replay of them in the same proportions.

Bucketed or padded pipelines (`group_by_window`, `padded_batch`, a final short batch) yield
batches of several shapes. The compute-only phase measures the model on batches it does not
have to wait for; timing one cached batch would measure one shape, whose size may be far from
the average. `ShapeSampler` keeps one batch of each shape seen end to end, with how often it
came, and `replay` yields them again in those proportions, so the compute-only rate (per
example) compares like with like. Nothing here imports TensorFlow: a batch's shape is read from
the `.shape` of its leaves.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterator, Sequence
from typing import Any

from tfperf.measure._recorder import leaves
from tfperf.results.stages import BatchShape

#: Shapes kept for replay; steps with further shapes are counted but not replayed.
MAX_SHAPES = 16


@dataclasses.dataclass
class _Seen:
    batch: Any
    examples: int
    compute_s: list[float] = dataclasses.field(default_factory=list)
    #: Steps of shapes past `max_shapes` that this shape, the nearest in examples, stands for.
    stand_ins: int = 0

    @property
    def steps(self) -> int:
        return len(self.compute_s) + self.stand_ins


class ShapeSampler:
    """Keeps one batch per shape of the batches it is shown, and each shape's step times."""

    def __init__(self, max_shapes: int = MAX_SHAPES) -> None:
        self.max_shapes = max_shapes
        self._seen: dict[str, _Seen] = {}

    def add(self, batch: Any, examples: int, compute_s: float) -> None:
        """Records one step's batch (kept if its shape is new) and its compute time."""
        key = shape_of(batch)
        seen = self._seen.get(key)
        if seen is None and len(self._seen) >= self.max_shapes:
            # Too many shapes to keep (padding to each batch's longest element): the kept
            # shape nearest in examples stands in, so the replay keeps the example mix.
            nearest = min(self._seen.values(), key=lambda s: abs(s.examples - examples))
            nearest.stand_ins += 1
            return
        if seen is None:
            seen = self._seen[key] = _Seen(batch, examples)
        seen.compute_s.append(compute_s)

    @property
    def weights(self) -> list[int]:
        """Steps seen per kept shape, in the order the shapes first came."""
        return [seen.steps for seen in self._seen.values()]

    def batches(self) -> list[Any]:
        return [seen.batch for seen in self._seen.values()]

    def shapes(self) -> list[BatchShape]:
        """What was seen, for the result: each shape, its count and its compute times."""
        return [
            BatchShape(
                shape=key,
                steps=seen.steps,
                examples=seen.examples,
                first_compute_s=seen.compute_s[0],
                typical_compute_s=(
                    statistics.median(seen.compute_s[1:]) if len(seen.compute_s) > 1 else None
                ),
            )
            for key, seen in self._seen.items()
        ]

    def replay(self) -> Iterator[Any]:
        """The kept batches, endlessly, each as often as its shape came (see `schedule`)."""
        batches = self.batches()
        for index in schedule(self.weights):
            yield batches[index]


def schedule(weights: Sequence[int]) -> Iterator[int]:
    """Indices into `weights`, endlessly, each index as often as its weight, spread evenly.

    Smooth weighted round robin: over every `sum(weights)` indices each index comes exactly
    `weights[i]` times, and no shorter stretch strays from those proportions by more than one.

    Example:
        >>> import itertools
        >>> list(itertools.islice(schedule([3, 1]), 8))
        [0, 0, 1, 0, 0, 0, 1, 0]
    """
    if not weights or any(w < 1 for w in weights):
        raise ValueError(f"every weight must be >= 1, and one at least given, but got {weights}")
    total = sum(weights)
    current = [0] * len(weights)
    while True:
        for i, weight in enumerate(weights):
            current[i] += weight
        chosen = max(range(len(weights)), key=lambda i: current[i])
        current[chosen] -= total
        yield chosen


def shape_of(batch: Any) -> str:
    """The shapes of a batch's tensors, e.g. `(32, 17), (32,)`; `()` for one without any."""
    shapes = [_shape(leaf) for leaf in leaves(batch)]
    return ", ".join(s for s in shapes if s is not None) or "()"


def _shape(leaf: Any) -> str | None:
    shape = getattr(leaf, "shape", None)
    if shape is None:
        return None
    dims = tuple(None if d is None else int(d) for d in shape)
    return str(dims)
