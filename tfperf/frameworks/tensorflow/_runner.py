"""Profiles a pipeline file: builds its dataset and train step for given knobs, then measures.

This is where the pipeline-file contract meets the profiler: the precision policy is set before the
model is built (`_build` builds it, for a knobs file, a plain file or a script), and
failures inside the user's code are turned into messages that point at the user's own line.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Iterator
from typing import Any

from tfperf import findings
from tfperf.errors import InputPipelineError, PipelineRuntimeError, TrainStepError
from tfperf.frameworks import ProfileRequest, StageNode
from tfperf.frameworks.tensorflow import _stages as stages
from tfperf.frameworks.tensorflow import _tf
from tfperf.frameworks.tensorflow._autotune import IteratorRecorder
from tfperf.frameworks.tensorflow._buffers import buffer_holds
from tfperf.frameworks.tensorflow._build import Built, build
from tfperf.frameworks.tensorflow._chain import recover_stages
from tfperf.frameworks.tensorflow._distributed import distribution_of, epoch_of
from tfperf.frameworks.tensorflow._edit_checks import ram_budget
from tfperf.frameworks.tensorflow._loop import LoopSession
from tfperf.knobs import CODE_KNOBS, SITES, Knobs
from tfperf.measure import (
    Budget,
    EpochInfo,
    Measurement,
    attribute_restarts,
    profile_limit,
    restart_stage,
    window_steps,
)
from tfperf.measure.emulated import EmulatedStep
from tfperf.measure.served import ServedLoop, script_phase_s
from tfperf.pipeline import PipelineFile, PipelineKind
from tfperf.results import ProfileResult
from tfperf.results.discovery import Discovery
from tfperf.results.stages import EpochSource, MemoryAccount, StageReport, memory_account

logger = logging.getLogger(__name__)

#: The stage analysis's own budget, seconds, when the profile has none or a larger one.
STAGE_BUDGET_S = 30.0


def profile_pipeline(
    pipeline: PipelineFile, knobs: Knobs | None = None, **options: Any
) -> ProfileResult:
    """Measures `pipeline` under `knobs` (default: the file's `BASELINE`), as `TensorFlow.profile`
    does; `options` are the fields of `tfperf.frameworks.ProfileRequest`.

    The values AUTOTUNE settled on are read at the end of the end-to-end phase
    (`result.autotune`). With `analyse_stages`, every stage is then measured on its own
    (`result.stages`, see `_stages`) and the advice names the limiting stage. Under a
    `strategy` (None takes the file's `make_strategy()`, or a script's own, else none),
    `result.distribution` holds the replicas and the per-replica figures.

    Raises:
        PipelineFileError: the file's functions break the contract (wrong return types).
        PipelineRuntimeError: the dataset or the train step failed while running.
    """
    from tfperf.frameworks.tensorflow._framework import FRAMEWORK

    return FRAMEWORK.profile(pipeline, knobs, ProfileRequest(**options))


class PipelineMeasurement(Measurement):
    """A tf.data profile: the dataset built under its precision policy, its AUTOTUNE choices,
    buffers, distribution and allocator peaks, and the stage analysis."""

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        if self.request.owns_process:
            _tf.enable_gpu_memory_growth()
        with _tf.precision_policy(self.knobs.mixed_precision):
            yield

    def measure(self) -> ProfileResult:
        request, knobs = self.request, self.knobs
        if self._serves_loop():
            built, served = self._run_script()
            if served is not None:
                return served
        else:
            # The emulated step is the built train step: `profile` records it as one.
            emulated = None if request.step_time_s is None else EmulatedStep(request.step_time_s)
            built = self.built = build(self.pipeline, knobs, request.strategy, emulated)
        request.discovered(built.discovery)
        self.chain = recover_stages(built.dataset)
        self.recorder = IteratorRecorder(built.data, self.chain)
        _tf.reset_allocator_peaks()
        return self.phases(
            self.recorder,
            built.step,
            knobs=knobs if built.discovery is None else measured_knobs(knobs, built.discovery),
            epoch=epoch_info(built.dataset, self.chain, epoch_of(built, request.epoch_steps)),
            steps=window_steps(request.steps, self.chain),
            progress=self.recorder.progress(request.progress),
        )

    def _serves_loop(self) -> bool:
        """Whether a script that trains in its own loop would be served the phases: a script
        run as it is, under no strategy or emulated step of tfperf's."""
        request = self.request
        return (
            self.pipeline.kind is PipelineKind.SCRIPT
            and request.strategy is None
            and request.step_time_s is None
        )

    def _run_script(self) -> tuple[Built, ProfileResult | None]:
        """A script run once, to its `fit` (the built model's step is then measured as a
        pipeline file's), or through its own loop over a tf.data dataset, which is served
        the phases as it trains (`_loop`): then the profile is measured here too."""
        request, started = self.request, time.perf_counter()
        with self.profiler() as profiler:
            served = ServedLoop(
                profiler,
                request.steps,
                request.min_seconds,
                lambda: script_phase_s(request.budget_s, time.perf_counter() - started),
                sync=_tf.device_sync(),
                measure_pipeline=request.measures_pipeline,
                measure_compute=request.measures_compute,
            )
            session = LoopSession(served, lambda dataset: self._served_input(dataset, served))
            try:
                built = self.built = build(self.pipeline, self.knobs, session=session)
                served.finish(self.pipeline.path.name)
            finally:
                served.close()
        if built.loop is None:
            return built, None
        request.discovered(built.discovery)
        result = profiler.result()
        result.cycled = built.loop.cycled
        if built.discovery is not None:
            result.knobs = measured_knobs(self.knobs, built.discovery)
        return built, result

    def _served_input(self, dataset: Any, served: ServedLoop) -> Any:
        """What the profiler iterates for a script's own loop over `dataset`, with the
        records `finish` reads: its stages, AUTOTUNE's readout, a real epoch's length."""
        request = self.request
        self.built = Built(dataset, None, None, None)  # what a failure is explained by
        self.chain = recover_stages(dataset)
        self.recorder = IteratorRecorder(dataset, self.chain)
        served.profiler.epoch = epoch_info(dataset, self.chain, request.epoch_steps)
        served.profiler.progress = self.recorder.progress(request.progress)
        served.steps = window_steps(request.steps, self.chain)  # as a pipeline file's
        _tf.reset_allocator_peaks()  # the phases start now
        return self.recorder

    def explain(self, error: InputPipelineError | TrainStepError) -> PipelineRuntimeError:
        if isinstance(error, InputPipelineError):
            return _explain_input_error(error, self.built.dataset, self.pipeline)
        return _explain_step_error(error, self.built.dataset, self.built.model, self.pipeline)

    def finish(self, result: ProfileResult) -> ProfileResult:
        built, chain, budget_s = self.built, self.chain, self.request.budget_s
        result.autotune = self.recorder.readout
        result.discovery = built.discovery
        result.distribution = distribution_of(built, result)
        result.dataset_options = _tf.dataset_options(built.dataset)
        result.memory = _memory(chain, result)
        if self.request.analyse_stages:
            stages_s = Budget(budget_s).stages_s(STAGE_BUDGET_S)
            seconds = stage_window(self.request.stage_seconds, stages_s, chain)
            result.stages = _stage_report(built.dataset, result, seconds, budget_s)
            result = attribute_restarts(result)
            result.limit = profile_limit(result)
        _tf.attach_allocator_peaks(result.gpus)
        return findings.conclude(result)


def _memory(chain: list[StageNode], result: ProfileResult) -> MemoryAccount:
    """What the pipeline's buffers hold, beside the peak RSS the profile measured."""
    holds = buffer_holds(chain, result.autotune, result.environment.cpu_count)
    peak = result.host_memory.peak_rss_bytes if result.host_memory is not None else None
    return memory_account(holds, peak, ram_budget())


def measured_knobs(knobs: Knobs, discovery: Discovery) -> dict[str, Any]:
    """What a plain file or script ran with: the knobs tfperf applies, and every site's value.

    The knobs only user code reads (`CODE_KNOBS`) are left out: such code reads none, so
    their values would describe a configuration that never ran.
    """
    applied = {k: v for k, v in knobs.to_dict().items() if k not in CODE_KNOBS and k != SITES}
    values = {site.name: knobs.sites.get(site.name, site.value) for site in discovery.sites}
    return {**applied, **values}


def epoch_info(dataset: Any, chain: list[StageNode], epoch_steps: int | None) -> EpochInfo:
    """A real epoch's length (given, else the dataset's cardinality) and what a restart refills."""
    stage = restart_stage(chain)
    label, kind = stage if stage is not None else (None, None)
    steps, source = epoch_steps, EpochSource.GIVEN
    if steps is None:
        steps, source = _tf.cardinality(dataset), EpochSource.CARDINALITY
    return EpochInfo(steps=steps, source=source, stage=label, stage_kind=kind)


#: The shortest window a stage is measured over when the budget is small: below it, a cut's
#: rate is mostly its start-up.
MIN_STAGE_SECONDS = 0.1


def stage_window(seconds: float, budget_s: float, chain: list[StageNode]) -> float:
    """Each stage's window, shortened where the budget holds fewer cuts than the ones that
    find the limit (the output, a bisection over the stages, the cut before the limit, and
    one to spare): a small `--budget` then measures the costly stage over shorter windows
    rather than leave it unmeasured."""
    cuts = math.ceil(math.log2(max(2, len(chain)))) + 3
    fitted = budget_s / cuts - stages.WARMUP_S
    return max(MIN_STAGE_SECONDS, min(seconds, fitted))


def _stage_report(
    dataset: Any, result: ProfileResult, seconds: float, budget_s: float | None
) -> StageReport:
    consumption = result.compute_only.examples_per_sec if result.compute_only else None
    try:
        return stages.analyse_stages(
            dataset,
            consumption,
            seconds_per_stage=seconds,
            budget_s=Budget(budget_s).stages_s(STAGE_BUDGET_S),
        )
    except Exception as error:  # the profile stands without it; say why it is missing
        logger.warning("the stage analysis failed", exc_info=True)
        return StageReport(
            stages=[],
            bottleneck_index=None,
            falls_short_index=None,
            consumption_examples_per_sec=consumption,
            seconds_per_stage=seconds,
            warmup_s=0.0,
            duration_s=0.0,
            note=f"the stage analysis failed: {type(error).__name__}: {error}",
            advice="",
        )


def _explain_input_error(
    error: InputPipelineError, dataset: Any, pipeline: PipelineFile
) -> PipelineRuntimeError:
    cause = error.__cause__ or error
    location = _tf.input_error_location(dataset, cause, pipeline.user_paths)
    if not location:
        location = _tf.user_frames_of(cause, pipeline.user_paths)
    message = (
        f"{pipeline.path.name}: the dataset failed while producing batch {error.step + 1}: "
        f"{type(cause).__name__}: {_tf.short_tf_message(cause)}"
    )
    if location:
        message += f"\nThe failing operation was created here:\n{location}"
    return PipelineRuntimeError(message + "\nFix the dataset function, then run again.")


def _explain_step_error(
    error: TrainStepError, dataset: Any, model: Any, pipeline: PipelineFile
) -> PipelineRuntimeError:
    cause = error.__cause__ or error
    summary = f"{type(cause).__name__}: {_tf.short_tf_message(cause)}"
    if model is not None and error.step == 0 and isinstance(cause, (ValueError, TypeError)):
        return PipelineRuntimeError(
            f"{pipeline.path.name}: the model rejects the dataset's batches.\n"
            f"  dataset yields:        {_tf.describe_structure(dataset.element_spec)}\n"
            f"  model expects inputs:  {_tf.model_input_structure(model)}\n"
            "Batches must be (inputs, targets) matching the model; check make_dataset's final "
            f"map and the model's Input shape.\nKeras said: {_first_lines(summary)}"
        )
    where = _tf.user_frames_of(cause, pipeline.user_paths)
    return PipelineRuntimeError(
        f"{pipeline.path.name}: the train step failed on step {error.step + 1}: "
        f"{_first_lines(summary)}" + (f"\n{where}" if where else "")
    )


def _first_lines(text: str, count: int = 6) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return "\n".join(lines[:count])
