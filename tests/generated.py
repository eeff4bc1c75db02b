"""A family of generated tf.data pipelines whose truth is known from how they were made.

tfperf's rules were first calibrated on its own benchmark pipelines; this family checks them
on pipelines nobody tuned a rule for. Each member is a pipeline file (`Generated.source()`)
with stages of set cost: a decode map that blocks (sleeps, releasing the GIL) for a set time
per element at a set parallelism, a shuffle before or after it, a batch, a prefetch, a finite
or infinite (`repeat()`) epoch, small or large elements, and a train step of a set time. What
tfperf should find follows from those numbers alone (`Generated.truth()`): the verdict, the
limiting stage, the stage a restart waits for, and what each buffer holds.

The suite checks the rules that need no clock against every member (memory by buffer, restart
attribution on the family's own first-element times); `python -m benchmarks.generated`
profiles each member for real and checks the rest (verdict, limiting stage, limit >= best
measured rate). Only members whose truth has a wide margin are in the family: a busy machine
cannot turn a 4x input deficit into a surplus.
"""

from __future__ import annotations

import dataclasses
import math
import textwrap
from enum import Enum

#: Bytes of one element index (the source's int64 scalar).
INDEX_BYTES = 8
#: Margin by which a member's input rate and model rate differ: the verdict is then certain.
MARGIN = 4.0


class Verdict(str, Enum):
    """The verdicts the family is built to produce (tfperf's values)."""

    INPUT_BOUND = "highly-input-bound"
    COMPUTE_BOUND = "compute-bound"


@dataclasses.dataclass(frozen=True)
class Generated:
    """One generated pipeline, by its set costs.

    Attributes:
        name: a short name, also the file's stem.
        elements: examples in one epoch.
        infinite: the dataset ends with `repeat()`: it never restarts.
        shape: one decoded example's shape (float32).
        decode_s: seconds the decode map blocks per element.
        parallelism: the decode map's `num_parallel_calls` (1: written sequential).
        shuffle: the shuffle buffer; 0: no shuffle.
        shuffle_after_decode: the shuffle holds decoded examples (else element indices).
        batch: examples per batch.
        prefetch: batches the final prefetch holds.
        step_s: seconds the train step takes per batch.
    """

    name: str
    elements: int
    infinite: bool
    shape: tuple[int, ...]
    decode_s: float
    parallelism: int
    shuffle: int
    shuffle_after_decode: bool
    batch: int
    prefetch: int
    step_s: float

    @property
    def example_bytes(self) -> int:
        return 4 * math.prod(self.shape)

    @property
    def decode_label(self) -> str:
        return "map(decode)"

    @property
    def shuffle_label(self) -> str:
        return f"shuffle({self.shuffle})"

    def input_rate(self) -> float:
        """Examples/s the decode delivers: its parallelism over its time per element."""
        return self.parallelism / self.decode_s

    def model_rate(self) -> float:
        """Examples/s the train step consumes."""
        return self.batch / self.step_s

    def truth(self) -> Truth:
        """What tfperf should find, from the set costs alone."""
        input_bound = self.input_rate() * MARGIN <= self.model_rate()
        if not input_bound and self.input_rate() < MARGIN * self.model_rate():
            raise ValueError(f"{self.name}: input and model rates are within {MARGIN}x")
        return Truth(
            verdict=Verdict.INPUT_BOUND if input_bound else Verdict.COMPUTE_BOUND,
            limiting_stage=self.decode_label if input_bound else None,
            restart_stage=None if self.infinite else self._restart_stage(),
            holds=self._holds(),
        )

    def first_element_s(self) -> dict[str, tuple[float, float]]:
        """Each stage's time to its first element after a fresh start, and its rate in
        elements/s, as the set costs make them (the family's own stage cuts)."""
        per_element = self.decode_s / self.parallelism
        cuts: dict[str, tuple[float, float]] = {"range": (0.0, 1e6)}
        if self.shuffle and not self.shuffle_after_decode:
            cuts[self.shuffle_label] = (0.0, 1e6)
        reached = self.decode_s
        cuts[self.decode_label] = (reached, 1 / per_element)
        if self.shuffle and self.shuffle_after_decode:
            reached += (min(self.shuffle, self.elements) - 1) * per_element
            cuts[self.shuffle_label] = (reached, 1 / per_element)
        reached += (self.batch - 1) * per_element
        cuts[f"batch({self.batch})"] = (reached, 1 / (per_element * self.batch))
        cuts[f"prefetch({self.prefetch})"] = cuts[f"batch({self.batch})"]
        return cuts

    def _restart_stage(self) -> str:
        if self.shuffle and self.shuffle_after_decode and min(self.shuffle, self.elements) > 2:
            return self.shuffle_label
        return self.decode_label

    def _holds(self) -> dict[str, float]:
        holds: dict[str, float] = {}
        if self.shuffle:
            each = self.example_bytes if self.shuffle_after_decode else INDEX_BYTES
            holds[self.shuffle_label] = min(self.shuffle, self.elements) * each
        if self.parallelism > 1:
            holds[self.decode_label] = self.parallelism * self.example_bytes
        holds[f"prefetch({self.prefetch})"] = self.prefetch * self.batch * self.example_bytes
        return holds

    def source(self) -> str:
        """The pipeline file: `make_dataset(knobs)` and `make_train_step(knobs)`."""
        shuffle = f".shuffle({self.shuffle})" if self.shuffle else ""
        before, after = ("", shuffle) if self.shuffle_after_decode else (shuffle, "")
        repeat = ".repeat()" if self.infinite else ""
        parallel = f", num_parallel_calls={self.parallelism}" if self.parallelism > 1 else ""
        return textwrap.dedent(
            f"""
            import time
            import numpy as np
            import tensorflow as tf

            BASELINE = {{"batch_size": {self.batch}}}
            SHAPE = {self.shape!r}

            def _decode(index):
                time.sleep({self.decode_s!r})
                return np.zeros(SHAPE, "float32")

            def decode(index):
                image = tf.numpy_function(_decode, [index], tf.float32)
                return tf.ensure_shape(image, SHAPE)

            def make_dataset(knobs):
                ds = tf.data.Dataset.range({self.elements}){before}
                ds = ds.map(decode{parallel}){after}
                return ds.batch(knobs.batch_size).prefetch({self.prefetch}){repeat}

            def make_train_step(knobs):
                def step(batch):
                    time.sleep({self.step_s!r})
                return step
            """
        ).lstrip()


@dataclasses.dataclass(frozen=True)
class Truth:
    """What tfperf should find on a generated pipeline.

    Attributes:
        verdict: the verdict on TensorBoard's scale.
        limiting_stage: the stage that limits it; None when compute does.
        restart_stage: the stage a restart waits for; None when it never restarts.
        holds: bytes each buffering stage holds at most, by label.
    """

    verdict: Verdict
    limiting_stage: str | None
    restart_stage: str | None
    holds: dict[str, float]


def family() -> list[Generated]:
    """The members: finite and infinite, short and long epochs, small and large elements,
    sequential and parallel decodes, input-bound and compute-bound by a wide margin."""
    small, large = (16,), (128, 128, 3)  # 64 B and 192 KiB an example
    return [
        # Four files decoded slowly on one thread, shuffled by name: a restart waits for the
        # decode, not the shuffle of four indices (issue 45).
        Generated("four_files", 4, False, small, 0.02, 1, 256, False, 2, 1, 0.001),
        # A shuffle of decoded images refilling at every restart of a long-enough epoch.
        Generated("decoded_shuffle", 64, False, large, 0.002, 2, 48, True, 8, 2, 0.2),
        # An infinite, parallel, compute-bound pipeline of small elements.
        Generated("infinite_small", 256, True, small, 0.001, 4, 64, False, 32, 2, 0.2),
        # A long epoch of large elements, input-bound on a sequential decode.
        Generated("long_sequential", 512, False, large, 0.01, 1, 0, False, 16, 4, 0.01),
        # Short epochs of small elements, input-bound with a parallel decode.
        Generated("short_parallel", 24, False, small, 0.02, 2, 16, False, 4, 1, 0.005),
    ]


def by_name(name: str) -> Generated:
    """The member called `name`."""
    for member in family():
        if member.name == name:
            return member
    raise KeyError(f"no generated pipeline is called {name!r}")
