"""A family of generated tf.data pipelines whose truth is known from how they were made.

tfperf's rules were first calibrated on its own benchmark pipelines; this family checks them
on pipelines nobody tuned a rule for. Each member is a pipeline file (`Generated.source()`)
with stages of set cost: a decode map that blocks (sleeps, releasing the GIL) for a set time
per element at a set parallelism, then optionally a `cache()`, cheap maps, a shuffle, a cast
from uint8 to float32, a batch, a map on batches and a prefetch, with a finite or infinite
(`repeat()`) epoch, small or large elements, and a train step of a set time. What tfperf
should find follows from those numbers alone (`Generated.truth()`): the verdict, the limiting
stage, the stage a restart waits for (or the stages it must never blame), what each buffer
holds, which maps run on batches and which cast.

The suite checks every member without a clock of its own: memory by buffer on the real
dataset, restart attribution on the first-element times the set costs make, the verdict on
a fake clock that delivers batches when the set costs make them ready (`batch_ready_s`), and
the stage analysis under a small budget for the member that has one. `python -m
benchmarks.generated` profiles each member for real and checks the same truths (limit >=
best measured rate too). Only members whose truth has a wide margin are in the family: a busy
machine cannot turn a 4x input deficit into a surplus.
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
#: TensorBoard's moderately-input-bound bar: a compute-bound member's restarts keep its wait
#: a MARGIN below it.
MODERATELY_AT = 0.05
#: Seconds a filled in-memory cache takes per element it serves: far below any decode.
CACHE_S_PER_ELEMENT = 1e-5
#: Elements/s of the stages that only pass elements on, or do next to nothing per element.
FREE_RATE = 1e6


class Verdict(str, Enum):
    """The verdicts the family is built to produce (tfperf's values)."""

    INPUT_BOUND = "highly-input-bound"
    COMPUTE_BOUND = "compute-bound"


@dataclasses.dataclass(frozen=True)
class Cut:
    """The pipeline cut after one stage, as the set costs make it after a fresh start."""

    label: str
    kind: str  # tfperf's StageKind value
    first_element_s: float
    elements_per_sec: float
    batch_size: int | None = None


@dataclasses.dataclass(frozen=True)
class Generated:
    """One generated pipeline, by its set costs.

    Attributes:
        name: a short name, also the file's stem.
        elements: examples in one epoch.
        infinite: the dataset ends with `repeat()`: it never restarts.
        shape: one decoded example's shape.
        decode_s: seconds the decode map blocks per element.
        parallelism: the decode map's `num_parallel_calls` (1: written sequential).
        shuffle: the shuffle buffer; 0: no shuffle.
        shuffle_after_decode: the shuffle holds decoded examples (else element indices).
        batch: examples per batch.
        prefetch: batches the final prefetch holds.
        step_s: seconds the train step takes per batch.
        cache: `cache()` right after the decode (in memory): later epochs skip the decode.
        cast: the decode yields uint8 and `map(to_float)` casts it to float32 before the
            batch (after the shuffle); else the decode yields float32 and nothing casts.
        cheap_maps: maps after the decode that cost next to nothing (`map(shift)`).
        batch_map: a map on batches after the batch (`map(scale)`).
        budget_s: the profile's time budget (`--budget`), of which the stage analysis gets
            a fifth; None: the default. The suite sizes the analysis's budget to its shorter
            windows instead (tests/test_generated.py).
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
    cache: bool = False
    cast: bool = False
    cheap_maps: int = 0
    batch_map: bool = False
    budget_s: float | None = None

    @property
    def example_bytes(self) -> int:
        """Bytes of one example as batched (float32)."""
        return 4 * math.prod(self.shape)

    @property
    def decoded_bytes(self) -> int:
        """Bytes of one example as decoded: uint8 where a cast follows, else float32."""
        return (1 if self.cast else 4) * math.prod(self.shape)

    @property
    def decode_label(self) -> str:
        return "map(decode)"

    @property
    def shuffle_label(self) -> str:
        return f"shuffle({self.shuffle})"

    @property
    def batches(self) -> int:
        """Batches in one epoch (the last one may be short)."""
        return math.ceil(self.elements / self.batch)

    def input_rate(self) -> float:
        """Examples/s the decode delivers: its parallelism over its time per element."""
        return self.parallelism / self.decode_s

    def restart_wait_share(self) -> float:
        """Share of a real epoch spent waiting at its restart, the verdict's figure: a fresh
        start's time to its first batch over the epoch's steps and that wait; 0 when it never
        restarts."""
        if self.infinite:
            return 0.0
        restart_s = self.cuts()[-1].first_element_s
        steps = -(-self.elements // self.batch)  # batches in an epoch, the last one partial
        return restart_s / (steps * self.step_s + restart_s)

    def model_rate(self) -> float:
        """Examples/s the train step consumes."""
        return self.batch / self.step_s

    def truth(self) -> Truth:
        """What tfperf should find, from the set costs alone."""
        input_bound = self.input_rate() * MARGIN <= self.model_rate()
        if not input_bound and self.input_rate() < MARGIN * self.model_rate():
            raise ValueError(f"{self.name}: input and model rates are within {MARGIN}x")
        if not input_bound and MARGIN * self.restart_wait_share() >= MODERATELY_AT:
            raise ValueError(
                f"{self.name}: its restarts make {self.restart_wait_share():.1%} of an epoch "
                f"wait, within {MARGIN}x of the {MODERATELY_AT:.0%} bar"
            )
        return Truth(
            verdict=Verdict.INPUT_BOUND if input_bound else Verdict.COMPUTE_BOUND,
            limiting_stage=self.decode_label if input_bound else None,
            restart_stage=None if self.infinite else self._restart_stage(),
            restart_never=("range", self.decode_label) if self.cache else (),
            holds=self._holds(),
            batched_maps=("map(scale)",) if self.batch_map else (),
            casts=("map(to_float)",) if self.cast else (),
            measured=(self.decode_label,) if self.budget_s is not None else (),
        )

    def cuts(self) -> list[Cut]:
        """Each stage's time to its first element after a fresh start, and its rate in
        elements/s, as the set costs make them (the family's own stage cuts), a filled
        cache serving its elements."""
        per_element = self.decode_s / self.parallelism
        cuts = [Cut("range", "source", 0.0, FREE_RATE)]
        if self.shuffle and not self.shuffle_after_decode:
            cuts.append(Cut(self.shuffle_label, "shuffle", 0.0, FREE_RATE))
        reached = self.decode_s
        cuts.append(Cut(self.decode_label, "map", reached, 1 / per_element))
        if self.cache:
            reached, per_element = 0.0, CACHE_S_PER_ELEMENT
            cuts.append(Cut("cache", "cache", reached, 1 / per_element))
        cuts += [Cut("map(shift)", "map", reached, 1 / per_element)] * self.cheap_maps
        if self.shuffle and self.shuffle_after_decode:
            reached += (min(self.shuffle, self.elements) - 1) * per_element
            cuts.append(Cut(self.shuffle_label, "shuffle", reached, 1 / per_element))
        if self.cast:
            cuts.append(Cut("map(to_float)", "map", reached, 1 / per_element))
        reached += (self.batch - 1) * per_element
        rate = 1 / (per_element * self.batch)
        cuts.append(Cut(f"batch({self.batch})", "batch", reached, rate, self.batch))
        if self.batch_map:
            cuts.append(Cut("map(scale)", "map", reached, rate))
        cuts.append(Cut(f"prefetch({self.prefetch})", "prefetch", reached, rate))
        return cuts

    def batch_ready_s(self, epoch: int) -> list[float]:
        """Seconds from the start of pass `epoch` (0 first) to each of its batches being ready,
        the decode running ahead of the model without bound (a later pass of a cached member
        is served by the cache). An infinite member's pass is ten epochs long."""
        served = self.cache and epoch > 0
        first = 0.0 if served else self.decode_s
        per = CACHE_S_PER_ELEMENT if served else self.decode_s / self.parallelism
        buffered = self.shuffle - 1 if self.shuffle and self.shuffle_after_decode else 0
        total = self.elements * (10 if self.infinite else 1)
        count = math.ceil(total / self.batch)
        needed = [min((i + 1) * self.batch + buffered, total) for i in range(count)]
        return [first + (n - 1) * per for n in needed]

    def _restart_stage(self) -> str | None:
        if self.cache:
            return None  # what refills after the cache is cheap: only what it never is holds
        if self.shuffle and self.shuffle_after_decode and min(self.shuffle, self.elements) > 2:
            return self.shuffle_label
        return self.decode_label

    def _holds(self) -> dict[str, float]:
        holds: dict[str, float] = {}
        if self.cache:
            holds["cache"] = self.elements * self.decoded_bytes
        if self.shuffle:
            each = self.decoded_bytes if self.shuffle_after_decode else INDEX_BYTES
            holds[self.shuffle_label] = min(self.shuffle, self.elements) * each
        if self.parallelism > 1:
            holds[self.decode_label] = self.parallelism * self.decoded_bytes
        holds[f"prefetch({self.prefetch})"] = self.prefetch * self.batch * self.example_bytes
        return holds

    def source(self) -> str:
        """The pipeline file: `make_dataset(knobs)` and `make_train_step(knobs)`."""
        shuffle = f".shuffle({self.shuffle})" if self.shuffle else ""
        before, after = ("", shuffle) if self.shuffle_after_decode else (shuffle, "")
        repeat = ".repeat()" if self.infinite else ""
        parallel = f", num_parallel_calls={self.parallelism}" if self.parallelism > 1 else ""
        cache = ".cache()" if self.cache else ""
        shifts = ".map(shift)" * self.cheap_maps
        cast = ".map(to_float)" if self.cast else ""
        scale = ".map(scale)" if self.batch_map else ""
        dtype = "uint8" if self.cast else "float32"
        return textwrap.dedent(
            f"""
            import time
            import numpy as np
            import tensorflow as tf

            BASELINE = {{"batch_size": {self.batch}}}
            SHAPE = {self.shape!r}

            def _decode(index):
                time.sleep({self.decode_s!r})
                return np.zeros(SHAPE, "{dtype}")

            def decode(index):
                image = tf.numpy_function(_decode, [index], tf.{dtype})
                return tf.ensure_shape(image, SHAPE)

            def shift(image):
                return image + 1

            def to_float(image):
                return tf.cast(image, tf.float32) / 255.0

            def scale(images):
                return images * 2.0

            def make_dataset(knobs):
                ds = tf.data.Dataset.range({self.elements}){before}
                ds = ds.map(decode{parallel}){cache}{shifts}{after}{cast}
                return ds.batch(knobs.batch_size){scale}.prefetch({self.prefetch}){repeat}

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
        restart_stage: the stage a restart waits for; None when it never restarts, or when
            no one stage is certain (then `restart_never` says what it is not).
        restart_never: stages a restart must never be blamed on (below a `cache()`).
        holds: bytes each buffering stage holds at most, by label.
        batched_maps: maps that already run on batches (no "batch first" for them).
        casts: maps that cast uint8 to float32 before the batch.
        measured: stages the stage analysis must measure within the member's budget.
    """

    verdict: Verdict
    limiting_stage: str | None
    restart_stage: str | None
    restart_never: tuple[str, ...]
    holds: dict[str, float]
    batched_maps: tuple[str, ...] = ()
    casts: tuple[str, ...] = ()
    measured: tuple[str, ...] = ()


def family() -> list[Generated]:
    """The members: finite and infinite, short and long epochs, small and large elements,
    sequential and parallel decodes, input-bound and compute-bound by a wide margin, and one
    of each kind issue 53 found misjudged."""
    small, large, medium = (16,), (128, 128, 3), (32, 32, 3)  # 64 B, 192 KiB, 12 KiB
    return [
        # Four files decoded slowly on one thread, shuffled by name: a restart waits for the
        # decode, not the shuffle of four indices (issue 45).
        Generated("four_files", 4, False, small, 0.02, 1, 256, False, 2, 1, 0.001),
        # A shuffle of decoded images refilling at every restart of a long-enough epoch; the
        # step is long enough that the refill stays a MARGIN below the 5% bar.
        Generated("decoded_shuffle", 64, False, large, 0.002, 2, 48, True, 8, 2, 0.6),
        # An infinite, parallel, compute-bound pipeline of small elements.
        Generated("infinite_small", 256, True, small, 0.001, 4, 64, False, 32, 2, 0.2),
        # A long epoch of large elements, input-bound on a sequential decode.
        Generated("long_sequential", 512, False, large, 0.01, 1, 0, False, 16, 4, 0.01),
        # Short epochs of small elements, input-bound with a parallel decode.
        Generated("short_parallel", 24, False, small, 0.02, 2, 16, False, 4, 1, 0.005),
        # Epochs of two steps behind a shuffle holding the whole epoch: the second batch is
        # ready when the first is, so no step waits between restarts, yet input runs 20x
        # slower than the model: input-bound, never compute-bound (issue 53, item 1).
        Generated("two_step_epochs", 12, False, medium, 0.01, 1, 64, True, 6, 1, 0.003),
        # A decode, cached, then a large shuffle of the cached images: from the second epoch
        # a restart refills the shuffle from memory; the decode below the cache runs once
        # and is never what a restart waits for.
        Generated("cached_shuffle", 96, False, medium, 0.002, 2, 256, True, 8, 2, 0.1, cache=True),
        # A costly first stage under many cheap ones and a small budget (8 s of stage analysis,
        # where its 16 cuts take ~12 s): the analysis must reach and measure the decode, not
        # spend the budget from the output down.
        Generated(
            "costly_first",
            256,
            False,
            small,
            0.01,
            1,
            0,
            False,
            8,
            2,
            0.002,
            cheap_maps=12,
            budget_s=40.0,
        ),
        # A map on batches, after the batch; the decode still limits.
        Generated(
            "batched_map", 128, False, medium, 0.008, 1, 0, False, 8, 2, 0.004, batch_map=True
        ),
        # uint8 images cast to float32 before the batch: the shuffle holds uint8 (a quarter
        # of the float bytes), the prefetch float32.
        Generated(
            "cast_before_batch", 128, False, medium, 0.001, 2, 64, True, 8, 2, 0.2, cast=True
        ),
        # A prefetch of 1,024 large batches behind a slow decode: it holds little while
        # running, but the account sizes what it may hold (768 MiB).
        Generated("deep_prefetch", 64, False, large, 0.01, 1, 0, False, 4, 1024, 0.005),
    ]


def by_name(name: str) -> Generated:
    """The member called `name`."""
    for member in family():
        if member.name == name:
            return member
    raise KeyError(f"no generated pipeline is called {name!r}")
