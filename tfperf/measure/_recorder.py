"""One phase's steps as they are recorded, and what a step's batch and outputs hold.

`PhaseRecorder` collects a phase's steps and decides online where its warm-up ends;
`Progress` is what the profiler reports after every step. Neither imports TensorFlow: a batch's
size is read from the `.shape` of its leaves, and outputs are synchronised through `.numpy()`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from tfperf.errors import InputPipelineError
from tfperf.measure import _analysis as analysis
from tfperf.measure._window import MIN_BUDGET_STEPS
from tfperf.results import Phase, PhaseResult, StepRecord


@dataclasses.dataclass(frozen=True)
class Progress:
    """Reported after every step, so a caller can draw progress; the library never prints."""

    phase: Phase
    warming_up: bool
    measured_steps: int
    target_steps: int | None
    #: Examples/s over the measured steps so far (None during warm-up): lets a tuner prune a
    #: hopeless trial from its first measured window.
    examples_per_sec: float | None = None
    #: This step closed the phase's window: its steps and its minimum seconds are both reached.
    complete: bool = False


ProgressCallback = Callable[[Progress], None]


class PhaseRecorder:
    """Collects one phase's steps and decides online where its warm-up ends.

    `target` measured steps (None: as many as the data holds) and `min_seconds` of measured
    window make the phase `complete`, whichever comes last, as `timeit` autoranges: a fast
    pipeline's window is stretched to a length the clock and the host's noise allow.
    `max_seconds` (the phase's share of the profile's budget) ends it sooner: once the phase
    has run that long, warm-up included, with at least `MIN_BUDGET_STEPS` measured steps
    (warm-up is ended at half of it if step times have not settled by then).
    """

    def __init__(
        self,
        phase: Phase,
        warmup: int | None,
        rule: analysis.WarmupRule,
        target: int | None,
        min_seconds: float = 0.0,
        max_seconds: float | None = None,
    ) -> None:
        self.phase = phase
        self.target = target
        self.min_seconds = min_seconds
        self.max_seconds = max_seconds
        self.cut_by_budget = False
        self.fixed_warmup = warmup
        self.rule = rule
        self.steps: list[tuple[float, float, float, int, int]] = []
        self.time_to_first_batch_s = 0.0
        self.epochs_crossed = 0
        self.warmup_end: tuple[int, bool] | None = (warmup, True) if warmup == 0 else None

    def add(
        self, start_s: float, wait_s: float, compute_s: float, examples: int, epoch: int
    ) -> None:
        self.steps.append((start_s, wait_s, compute_s, examples, epoch))
        if self.warmup_end is not None:
            return
        if self.fixed_warmup is not None:
            if len(self.steps) >= self.fixed_warmup:
                self.warmup_end = (self.fixed_warmup, True)
        else:
            times = [wait + compute for _, wait, compute, _, _ in self.steps]
            self.warmup_end = analysis.detect_warmup_end(times, self.rule)
        if self.warmup_end is None and self._over_budget(0.5):
            self.warmup_end = (len(self.steps), False)

    def elapsed_seconds(self) -> float:
        """From the phase's first request to its last step's end, warm-up included."""
        if not self.steps:
            return 0.0
        last_start, last_wait, last_compute, _, _ = self.steps[-1]
        return last_start + last_wait + last_compute - self.steps[0][0]

    def _over_budget(self, share: float = 1.0) -> bool:
        return self.max_seconds is not None and self.elapsed_seconds() >= share * self.max_seconds

    @property
    def measured_steps(self) -> int:
        return len(self.steps) - self.warmup_end[0] if self.warmup_end else 0

    def measured(self) -> list[tuple[float, float, float, int, int]]:
        """The steps after warm-up (none while warm-up lasts)."""
        return self.steps[self.warmup_end[0] :] if self.warmup_end else []

    def measured_seconds(self) -> float:
        """The measured window so far, from its first request to its last step's end."""
        measured = self.measured()
        if not measured:
            return 0.0
        last_start, last_wait, last_compute, _, _ = measured[-1]
        return last_start + last_wait + last_compute - measured[0][0]

    def measured_rate(self) -> float | None:
        """Examples/s over the measured steps so far, from first request to last step's end."""
        seconds = self.measured_seconds()
        if seconds <= 0:
            return None
        return sum(step[3] for step in self.measured()) / seconds

    def complete(self) -> bool:
        """Whether the window holds `target` measured steps and lasts `min_seconds`, or the
        phase has used its `max_seconds` with at least `MIN_BUDGET_STEPS` measured."""
        if self._over_budget() and self.measured_steps >= MIN_BUDGET_STEPS:
            self.cut_by_budget = self.cut_by_budget or not self._asked_for_done()
            return True
        return self._asked_for_done()

    def _asked_for_done(self) -> bool:
        if self.target is None or self.measured_steps < self.target:
            return False
        return self.measured_seconds() >= self.min_seconds

    def finish(self) -> PhaseResult | None:
        if not self.steps:
            return None
        end, converged = self.warmup_end or (min(self.rule.min_steps, len(self.steps) - 1), False)
        end = min(end, len(self.steps) - 1)  # keep at least one measured step
        records = [
            StepRecord(start_s=s, wait_s=w, compute_s=c, examples=n, epoch=e, warmup=i < end)
            for i, (s, w, c, n, e) in enumerate(self.steps)
        ]
        result = analysis.summarise_phase(
            self.phase, records, self.time_to_first_batch_s, converged, self.epochs_crossed
        )
        result.cut_by_budget = self.cut_by_budget
        return result


def batch_examples(batch: Any) -> int:
    """Examples in a batch: the leading dimension of its first tensor-like leaf, else 1."""
    for leaf in leaves(batch):
        shape = getattr(leaf, "shape", None)
        if shape is not None and len(shape) > 0 and shape[0] is not None:
            return int(shape[0])
    return 1


def synchronise(outputs: Any) -> None:
    # `.numpy()` blocks until an eager tensor's value exists, so queued kernels cannot leak
    # into the next step's wait time.
    for leaf in leaves(outputs):
        numpy = getattr(leaf, "numpy", None)
        if callable(numpy):
            numpy()


def leaves(tree: Any) -> Iterator[Any]:
    """The tensors of a nested batch or step output: mappings, lists and tuples walked through."""
    if isinstance(tree, Mapping):
        for value in tree.values():
            yield from leaves(value)
    elif isinstance(tree, (list, tuple)):
        for value in tree:
            yield from leaves(value)
    elif tree is not None:
        yield tree


def input_error(error: Exception, recorder: PhaseRecorder) -> InputPipelineError:
    step = len(recorder.steps)
    return InputPipelineError(
        f"the dataset raised {type(error).__name__} while producing batch {step + 1}: {error}",
        step=step,
    )


def empty_message(recorder: PhaseRecorder) -> str:
    if recorder.steps:
        return (
            f"the dataset yielded nothing after its first epoch ({len(recorder.steps)} batches): "
            "a later epoch is empty, e.g. a one-shot generator; make the dataset re-iterable."
        )
    return (
        "the dataset is empty: it yielded no batch. Check the input files exist and are not "
        "filtered out, and that dropping a last partial batch (tf.data's drop_remainder, a "
        "DataLoader's drop_last) does not drop the only one."
    )
