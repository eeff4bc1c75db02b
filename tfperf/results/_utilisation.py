"""How busy the input keeps the accelerator: utilisation against MLPerf Storage's 90% bar.

MLPerf Storage passes a storage system when the emulated accelerators it feeds stay busy at
least 90% of the time: utilisation is `1 - wait fraction`, the share of each step the device
computes rather than waits for its batch. tfperf states it for the step it measured (an
emulated one, `--step-time`, or the model's own) and, from the pipeline-only rate, for the
shortest step the input still keeps above the bar, and for a step k times faster than the
model's (`--accelerator-speedup`), labelled as a prediction.

The model behind the threshold and the prediction (`wait_at`): with prefetch deep enough that
the input works while the step runs, a batch takes `interval` seconds to produce (the
pipeline-only batch interval) and a step `step` seconds, so each step waits
`max(0, interval - step)` for its batch and utilisation is `step / max(step, interval)`.

Example:
    >>> found = Utilisation.of(ProfileResult.load("p-profile.json"))  # doctest: +SKIP
    >>> found.min_step_s, found.points[0].utilisation  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import TYPE_CHECKING

from tfperf.units import format_seconds

if TYPE_CHECKING:
    from tfperf.results._profile import ProfileResult

#: MLPerf Storage's pass mark: each emulated accelerator busy at least 90% of the time.
MLPERF_STORAGE_BAR = 0.9
#: How far (in wait fraction) the measured wait may lie from the model's at the measured step
#: before the report says the measurement does not bear the model out: a run's noise and the
#: scheduling of a busy host move the wait by a few hundredths, a wrong model by far more.
MODEL_TOLERANCE = 0.15


class StepSource(str, Enum):
    """Where a step time came from."""

    EMULATED = "emulated"  # `--step-time`: the training step was a sleep of this length
    MEASURED = "measured"  # the model's own step, on cached batches (compute only)
    PREDICTED = "predicted"  # the model's step made `speedup` times faster: not measured


@dataclasses.dataclass
class UtilisationPoint:
    """The accelerator's wait and utilisation at one step time.

    Attributes:
        step_s: seconds per step (per batch) of the accelerator.
        source: whether that step was emulated, measured or predicted.
        wait_fraction: share of each step spent waiting for input; measured end to end for an
            emulated or measured step, the model's (`wait_at`) for a predicted one.
        model_wait_fraction: the model's wait at the step as it ran end to end, to check the
            model against the measurement; for a predicted point, the same as `wait_fraction`.
        speedup: for a predicted point, how many times faster than the measured step; else
            None.
    """

    step_s: float
    source: StepSource
    wait_fraction: float
    model_wait_fraction: float
    speedup: float | None = None

    @property
    def utilisation(self) -> float:
        """`1 - wait_fraction`: the share of each step the accelerator computes."""
        return 1.0 - self.wait_fraction

    def meets(self, bar: float) -> bool:
        return self.utilisation >= bar

    def describe(self, bar: float) -> str:
        """One sentence: where the step came from, its wait and utilisation against `bar`."""
        step = format_seconds(self.step_s)
        if self.source is StepSource.PREDICTED:
            which = f"Predicted for a step {self.speedup or 1:g}x faster ({step})"
        elif self.source is StepSource.EMULATED:
            which = f"Emulated step of {step}"
        else:
            which = f"The model's step of {step} (compute only)"
        meets = "meets" if self.meets(bar) else "below"
        sentence = (
            f"{which}: waits {_percent(self.wait_fraction)} of each step, utilisation "
            f"{_percent(self.utilisation)} ({meets} the {_percent(bar)} bar)."
        )
        if self.source is StepSource.PREDICTED:
            sentence += (
                " A prediction, not a measurement: with enough prefetch, each step waits "
                "max(0, input batch interval - step)."
            )
        return sentence


@dataclasses.dataclass
class Utilisation:
    """The accelerator's utilisation, and the shortest step the input feeds at the bar.

    Attributes:
        bar: the utilisation a step must reach (MLPerf Storage's 0.9).
        input_interval_s: seconds per batch of the input alone (the pipeline-only phase).
        min_step_s: the shortest step kept at least `bar` busy: `bar * input_interval_s`
            (see `Utilisation.min_step`).
        points: the measured (or emulated) step first, then a predicted one when asked.
        model_agrees: whether the measured wait lies within `MODEL_TOLERANCE` of the model's
            at the step as it ran; when False, `min_step_s` and any prediction are rough.
    """

    bar: float
    input_interval_s: float
    min_step_s: float
    points: list[UtilisationPoint]
    model_agrees: bool

    @property
    def measured(self) -> UtilisationPoint:
        """The point that was measured end to end (emulated or the model's own step)."""
        return self.points[0]

    @property
    def predicted(self) -> UtilisationPoint | None:
        """The point for a faster accelerator, when one was asked for."""
        return next((p for p in self.points if p.source is StepSource.PREDICTED), None)

    @staticmethod
    def min_step(input_interval_s: float, bar: float = MLPERF_STORAGE_BAR) -> float:
        """The shortest step the input keeps at least `bar` busy.

        Under the model (`wait_at`), utilisation is `step / max(step, interval)`; it reaches
        `bar` exactly when the input's batch interval is at most `1 / bar` of the step, i.e.
        `step >= bar * interval`: at 90%, a step of 0.9 of the interval or longer.
        """
        return bar * input_interval_s

    @classmethod
    def of(
        cls,
        result: ProfileResult,
        speedup: float | None = None,
        bar: float = MLPERF_STORAGE_BAR,
    ) -> Utilisation | None:
        """The utilisation of `result`; with `speedup`, also predicted for a step that many
        times faster than the model's measured one.

        None when the profile lacks what it needs: the pipeline-only phase, and for a real
        model the compute-only phase.

        Raises:
            ValueError: `speedup` is not positive, or asked of an emulated step (its step time
                is given, not measured: give the faster step time instead).
        """
        if speedup is not None and not 0 < speedup < float("inf"):
            raise ValueError(f"`speedup > 0` must hold, but got speedup={speedup}")
        if speedup is not None and result.emulated_step_s is not None:
            raise ValueError(
                "a speedup scales the model's measured step; with an emulated step, give the "
                "faster step time instead"
            )
        if result.pipeline_only is None or result.pipeline_only.steps_per_sec <= 0:
            return None
        interval = 1.0 / result.pipeline_only.steps_per_sec
        step = _measured_step(result)
        if step is None:
            return None
        end_to_end = result.end_to_end
        ran = end_to_end.compute_s / end_to_end.steps if end_to_end.steps else step
        measured = UtilisationPoint(
            step_s=step,
            source=StepSource.MEASURED if result.emulated_step_s is None else StepSource.EMULATED,
            wait_fraction=result.input_wait_fraction,
            model_wait_fraction=wait_at(ran, interval),
        )
        points = [measured]
        if speedup is not None:
            faster = step / speedup
            predicted = wait_at(faster, interval)
            points.append(
                UtilisationPoint(faster, StepSource.PREDICTED, predicted, predicted, speedup)
            )
        agrees = abs(measured.wait_fraction - measured.model_wait_fraction) <= MODEL_TOLERANCE
        return cls(bar, interval, cls.min_step(interval, bar), points, agrees)


def wait_at(step_s: float, interval_s: float) -> float:
    """The wait fraction of a step of `step_s` fed a batch every `interval_s` seconds.

    With prefetch deep enough that the input works while the step runs, each step waits
    `max(0, interval - step)` for its batch, so the wait fraction is
    `max(0, interval - step) / max(step, interval)`.
    """
    cycle = max(step_s, interval_s)
    return max(0.0, interval_s - step_s) / cycle if cycle > 0 else 0.0


def _measured_step(result: ProfileResult) -> float | None:
    """The step measured against: the emulated one as given, else the model's own step on
    cached batches (compute only); None when neither is known."""
    if result.emulated_step_s is not None:
        return result.emulated_step_s
    compute = result.compute_only
    if compute is None or compute.steps == 0:
        return None
    return compute.compute_s / compute.steps


def _percent(fraction: float) -> str:
    return f"{fraction * 100:.0f}%"
