"""Measures a training loop step by step: time blocked on input, then time computing.

`Profiler` instruments a loop the user writes; `profile()` runs the three measurements tfperf
makes of one configuration (end to end, pipeline only, compute only on cached batches replayed
in the shapes and proportions end to end saw). Neither
imports a framework: a step's outputs are synchronised by the `sync` each is given (a
framework's `Input.sync`; by default their `.numpy()` method), so any asynchronously dispatched
work is finished before the step's clock stops.

Example:
    >>> with tfperf.Profiler() as profiler:  # doctest: +SKIP
    ...     for batch in profiler.iterate(dataset, steps=200):
    ...         profiler.mark_step(train_step(batch))
    >>> profiler.result().verdict  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any

from tfperf import findings
from tfperf.errors import EmptyDatasetError, TfperfError, TrainStepError
from tfperf.hardware import collect_environment
from tfperf.knobs import Knobs
from tfperf.measure import _analysis as analysis
from tfperf.measure import _restarts as restarts
from tfperf.measure._batches import ShapeSampler
from tfperf.measure._emulated import EmulatedStep
from tfperf.measure._recorder import (
    PhaseRecorder,
    Progress,
    ProgressCallback,
    batch_examples,
    empty_message,
    input_error,
    synchronise,
)
from tfperf.probes import HostProbe, NvmlProbe, Probe, Sampler
from tfperf.results import Phase, ProfileResult, StepRecord

Clock = Callable[[], float]


@dataclasses.dataclass(frozen=True)
class _OpenStep:
    """A step whose batch has arrived and whose compute has not been closed yet."""

    recorder: PhaseRecorder
    requested: float
    arrived: float
    examples: int
    epoch: int


class Profiler:
    """Instruments a training loop: wrap the data with `iterate`, close each step with `mark_step`.

    Use it as a context manager: entering starts background sampling of host memory, CPU and
    GPUs; leaving stops it. Wait time is measured inside `iterate` (the time `next()` blocks);
    compute time runs from the batch's arrival to `mark_step(outputs)`, which waits for the
    outputs to be computed, or to the request for the next batch if `mark_step` is not called.

    Args:
        warmup: steps excluded from the figures at the start of each phase; None detects the
            end of warm-up from the step times.
        warmup_rule: when automatic warm-up detection counts step times as settled; None
            uses `analysis.WarmupRule()` (5-step windows within 15%, 3 to 100 steps).
        pipeline: a name for what is measured, recorded in the result.
        knobs: the configuration measured, recorded in the result.
        clock: seconds as a float; injectable so tests can assert exact figures.
        probes: hardware probes to sample; None means host memory/CPU and NVML GPUs.
        sample_interval_s: how often the probes are sampled.
        progress: called after every step with a `Progress`.
        epoch: a real epoch's length and the stage a restart refills, to weigh the cost of
            the dataset's restarts by (see `tfperf.measure._restarts`); None: one pass.
        sync: blocks until a step's outputs exist; the default calls `.numpy()` on each leaf.
    """

    def __init__(
        self,
        *,
        warmup: int | None = None,
        warmup_rule: analysis.WarmupRule | None = None,
        pipeline: str = "<loop>",
        knobs: Knobs | Mapping[str, Any] | None = None,
        clock: Clock = time.perf_counter,
        probes: Sequence[Probe] | None = None,
        sample_interval_s: float = 0.05,
        progress: ProgressCallback | None = None,
        epoch: restarts.EpochInfo | None = None,
        sync: Callable[[Any], None] = synchronise,
    ) -> None:
        if warmup is not None and warmup < 0:
            raise ValueError(f"`warmup >= 0` must hold, but got warmup={warmup}")
        self.warmup = warmup
        self.warmup_rule = warmup_rule or analysis.WarmupRule()
        self.pipeline = pipeline
        self.knobs = knobs.to_dict() if isinstance(knobs, Knobs) else dict(knobs or {})
        self.clock = clock
        self.probes = list(probes) if probes is not None else [HostProbe(), NvmlProbe()]
        self.progress = progress
        self.epoch = epoch
        self.sync = sync
        #: Batch shapes seen end to end; `profile()` fills it and replays it compute-only.
        self.shapes = ShapeSampler()
        self._sampler = Sampler(self.probes, self._elapsed, sample_interval_s)
        self._origin: float | None = None
        self._phases: dict[Phase, PhaseRecorder] = {}
        self._open: _OpenStep | None = None

    def __enter__(self) -> Profiler:
        self._origin = self.clock()
        for probe in self.probes:
            probe.open()
        if any(probe.available for probe in self.probes):
            self._sampler.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._sampler.stop()
        for probe in self.probes:
            probe.close()

    def iterate(
        self,
        data: Iterable[Any],
        *,
        steps: int | None = None,
        phase: Phase = Phase.END_TO_END,
        min_seconds: float = 0.0,
        max_seconds: float | None = None,
    ) -> Iterator[Any]:
        """Yields batches from `data`, timing how long each one takes to arrive.

        Args:
            steps: measured steps wanted after warm-up; iteration restarts `data` at the end of
                each epoch until they are reached. None: one pass over `data`, however long.
            phase: which measurement these steps belong to.
            min_seconds: with `steps`, the measured window also lasts at least this long
                (more steps are taken until it does), so a fast pipeline is not timed over a
                fraction of a second.
            max_seconds: the phase ends once it has run this long, warm-up included, whatever
                `steps` and `min_seconds` ask (see `PhaseRecorder`); None: no limit.

        Raises:
            EmptyDatasetError: `data` (or a later epoch of it) yields nothing.
            InputPipelineError: `data` raised while producing a batch.
        """
        if self._origin is None:
            raise TfperfError("start the profiler first: `with tfperf.Profiler() as profiler:`")
        if steps is not None and steps < 1:
            raise ValueError(f"`steps >= 1` must hold, but got steps={steps}")
        if min_seconds < 0:
            raise ValueError(f"`min_seconds >= 0` must hold, but got min_seconds={min_seconds}")
        recorder = PhaseRecorder(
            phase, self.warmup, self.warmup_rule, steps, min_seconds, max_seconds
        )
        self._phases[phase] = recorder
        return self._iterate(data, steps, recorder)

    def mark_step(self, outputs: Any = None) -> None:
        """Ends the current step once `outputs` (tensors, numbers, nested) are computed."""
        if outputs is not None:  # nothing to wait for: a sync sees only real outputs
            self.sync(outputs)
        self._close_step()

    def result(self) -> ProfileResult:
        """Everything measured so far, as a saveable `ProfileResult`."""
        phases = {phase: recorder.finish() for phase, recorder in self._phases.items()}
        end_to_end = phases.get(Phase.END_TO_END)
        if end_to_end is None:
            raise TfperfError(
                "no end-to-end step was measured: loop over `profiler.iterate(dataset)` and call "
                "`profiler.mark_step(outputs)` after each train step."
            )
        compute_only = phases.get(Phase.COMPUTE_ONLY)
        pipeline_only = phases.get(Phase.PIPELINE_ONLY)
        restart = restarts.restart_cost(end_to_end, self.epoch, pipeline_only)
        wait = restarts.verdict_wait(end_to_end, restart)
        verdict = analysis.classify(wait)
        host = next((p for p in self.probes if isinstance(p, HostProbe) and p.available), None)
        nvml = next((p for p in self.probes if isinstance(p, NvmlProbe)), None)
        gpus = nvml.gpus() if nvml is not None and nvml.available else []
        result = ProfileResult(
            pipeline=self.pipeline,
            knobs=self.knobs,
            verdict=verdict,
            input_wait_fraction=wait,
            speedup_if_input_free=analysis.speedup_if_input_free(end_to_end, compute_only, restart),
            compute_slowdown=analysis.compute_slowdown(end_to_end, compute_only),
            advice="",
            end_to_end=end_to_end,
            pipeline_only=pipeline_only,
            compute_only=compute_only,
            host_memory=host.memory() if host else None,
            cpu=host.cpu() if host else None,
            gpus=gpus,
            gpu_unavailable_reason=_gpu_reason(nvml),
            environment=collect_environment([gpu.name for gpu in gpus]),
            probes={p.name: p.unavailable_reason or "ok" for p in self.probes},
            created_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            restarts=restart,
            batch_shapes=self.shapes.shapes(),
        )
        return findings.conclude(result)

    def last_step(self, phase: Phase) -> StepRecord:
        """The last closed step of `phase` (warm-up flag not yet decided: False)."""
        start, wait, compute, examples, epoch = self._phases[phase].steps[-1]
        return StepRecord(start, wait, compute, examples, epoch, warmup=False)

    def _iterate(
        self, data: Iterable[Any], steps: int | None, recorder: PhaseRecorder
    ) -> Iterator[Any]:
        requested = self.clock()
        iterator, epoch, in_epoch = iter(data), 0, 0
        try:
            while True:
                self._close_step()
                if recorder.complete():
                    return
                if recorder.steps:
                    requested = self.clock()
                try:
                    batch = next(iterator)
                except StopIteration:
                    if steps is None and recorder.steps:
                        return
                    iterator = self._next_epoch(data, iterator, in_epoch, recorder)
                    epoch, in_epoch = epoch + 1, 0
                    batch = self._first_of_epoch(iterator, recorder)
                except Exception as error:
                    raise input_error(error, recorder) from error
                arrived = self.clock()
                if not recorder.steps:
                    recorder.time_to_first_batch_s = arrived - requested
                self._open = _OpenStep(recorder, requested, arrived, batch_examples(batch), epoch)
                in_epoch += 1
                yield batch
        finally:
            self._close_step()

    def _next_epoch(
        self, data: Iterable[Any], finished: Iterator[Any], in_epoch: int, recorder: PhaseRecorder
    ) -> Iterator[Any]:
        if in_epoch == 0:
            raise EmptyDatasetError(empty_message(recorder))
        restarted = iter(data)
        if restarted is finished:
            raise TfperfError(
                f"the data ran out after {len(recorder.steps)} steps and cannot be restarted "
                "because it is an iterator: pass the dataset itself, or ask for fewer steps."
            )
        recorder.epochs_crossed += 1
        return restarted

    def _first_of_epoch(self, iterator: Iterator[Any], recorder: PhaseRecorder) -> Any:
        try:
            return next(iterator)
        except StopIteration:
            raise EmptyDatasetError(empty_message(recorder)) from None
        except Exception as error:
            raise input_error(error, recorder) from error

    def _close_step(self) -> None:
        step, self._open = self._open, None
        if step is None:
            return
        done = self.clock()
        recorder = step.recorder
        recorder.add(
            step.requested - self._elapsed_origin(),
            step.arrived - step.requested,
            done - step.arrived,
            step.examples,
            step.epoch,
        )
        if self.progress is not None:
            self.progress(
                Progress(
                    phase=recorder.phase,
                    warming_up=recorder.warmup_end is None,
                    measured_steps=recorder.measured_steps,
                    target_steps=recorder.target,
                    examples_per_sec=recorder.measured_rate(),
                    complete=recorder.complete(),
                )
            )

    def _elapsed_origin(self) -> float:
        assert self._origin is not None, "the profiler was not started"
        return self._origin

    def _elapsed(self) -> float:
        return self.clock() - (self._origin or 0.0)


def profile(
    dataset: Iterable[Any],
    train_step: Callable[[Any], Any],
    *,
    steps: int = 100,
    min_seconds: float = 0.0,
    warmup: int | None = None,
    pipeline: str = "<dataset>",
    knobs: Knobs | Mapping[str, Any] | None = None,
    measure_pipeline: bool = True,
    measure_compute: bool = True,
    clock: Clock = time.perf_counter,
    probes: Sequence[Probe] | None = None,
    progress: ProgressCallback | None = None,
    epoch: restarts.EpochInfo | None = None,
    sync: Callable[[Any], None] = synchronise,
    max_seconds: float | None = None,
    step_time_s: float | None = None,
) -> ProfileResult:
    """Measures one configuration three ways: end to end, pipeline only, compute only.

    The compute-only phase replays one cached batch of each shape the end-to-end phase saw,
    each as often as it came there, so its per-example rate is that of the same batch mix.

    Args:
        dataset: a `tf.data.Dataset` (or any re-iterable) yielding batches.
        train_step: called with each batch; its return value is synchronised.
        steps: measured steps per phase after warm-up (finite datasets are repeated).
        min_seconds: each phase's measured window lasts at least this long; more steps are
            taken until it does.
        warmup: warm-up steps per phase; None detects the end of warm-up automatically.
        epoch: a real epoch's length (and the stage a restart refills), by which the cost of
            the dataset's restarts is weighed; None counts one pass of `dataset`.
        sync: blocks until a step's outputs exist (a framework's `Input.sync`); the default
            calls `.numpy()` on every leaf that has one.
        max_seconds: each phase ends once it has run this long (its share of a time budget,
            `tfperf.measure._window.phase_seconds`); None: no limit.
        step_time_s: emulate the accelerator: `train_step` is replaced by a sleep of this
            many seconds per batch (`EmulatedStep`, the DLIO / MLPerf Storage method). A
            `train_step` that is an `EmulatedStep` is emulated as well; either way the result
            records the step's length (`emulated_step_s`).

    Returns:
        A `ProfileResult` with the verdict, the three throughputs and memory figures.

    Example:
        >>> result = tfperf.profile(dataset, lambda b: model.train_on_batch(*b))  # doctest: +SKIP
    """
    if steps < 1:
        raise ValueError(f"`steps >= 1` must hold, but got steps={steps}")
    if step_time_s is not None:
        train_step = EmulatedStep(step_time_s)
    if isinstance(train_step, EmulatedStep):
        sync = train_step.sync
    profiler = Profiler(
        warmup=warmup,
        pipeline=pipeline,
        knobs=knobs,
        clock=clock,
        probes=probes,
        progress=progress,
        epoch=epoch,
        sync=sync,
    )
    with profiler:
        window = functools.partial(
            profiler.iterate, steps=steps, min_seconds=min_seconds, max_seconds=max_seconds
        )
        batches = window(dataset)
        _run_steps(profiler, batches, train_step, sampler=profiler.shapes)
        if measure_pipeline:
            pipeline_only = window(dataset, phase=Phase.PIPELINE_ONLY)
            for _ in pipeline_only:
                profiler.mark_step()
        if measure_compute:
            replayed = window(profiler.shapes.replay(), phase=Phase.COMPUTE_ONLY)
            _run_steps(profiler, replayed, train_step)
    result = profiler.result()
    if isinstance(train_step, EmulatedStep):
        result.emulated_step_s = train_step.seconds
    return result


def _run_steps(
    profiler: Profiler,
    batches: Iterator[Any],
    train_step: Callable[[Any], Any],
    sampler: ShapeSampler | None = None,
) -> None:
    """Runs `train_step` on every batch, closing each step; `sampler` sees each batch's shape."""
    for number, batch in enumerate(batches):
        try:
            outputs = train_step(batch)
            profiler.sync(outputs)
        except Exception as error:
            raise TrainStepError(
                f"the train step raised {type(error).__name__} on step {number + 1}: {error}",
                step=number,
            ) from error
        profiler.mark_step()
        if sampler is not None:
            step = profiler.last_step(Phase.END_TO_END)
            sampler.add(batch, step.examples, step.compute_s)


def _gpu_reason(nvml: NvmlProbe | None) -> str | None:
    if nvml is None:
        return "the NVML probe was not run"
    if nvml.available and not nvml.gpus():
        return "NVML found no GPU"
    return nvml.unavailable_reason
