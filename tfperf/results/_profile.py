"""What a profile measured, as plain dataclasses that round-trip through JSON.

Nothing here imports TensorFlow: a saved `ProfileResult` can be loaded, rendered and turned into
a pandas DataFrame on any machine. Times are seconds, memory is bytes, CPU percentages count
100 for one fully busy core. Every time series shares one origin: the start of the profile.

Example:
    >>> result = ProfileResult.load("reports/quickstart-profile.json")  # doctest: +SKIP
    >>> result.verdict, result.end_to_end.examples_per_sec  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfperf.errors import ResultFileError
from tfperf.results._discovery import Discovery
from tfperf.results._distribution import Distribution
from tfperf.results._findings import Conflict, Finding
from tfperf.results._json import JsonRecord
from tfperf.results._limit import RATE_NOISE, Limit, TrainingRate
from tfperf.results._loader_checks import PassCheck, WorkerMemory
from tfperf.results._memory import MemoryAccount
from tfperf.results._scaling import ScalingCurve
from tfperf.results._utilisation import Utilisation

if TYPE_CHECKING:
    import pandas as pd

    from tfperf.results._gpu_memory import GpuMemoryAdvice, HostCopy

SCHEMA_VERSION = 1


#: Wait share of step time at or above which input is the main problem (TensorBoard: 20%).
HIGHLY_INPUT_BOUND_AT = 0.20
#: Wait share at or above which input costs noticeable time (TensorBoard: 5%).
MODERATELY_INPUT_BOUND_AT = 0.05


class Verdict(str, Enum):
    """Where the step time goes, on the scale of TensorBoard's input-pipeline analyser."""

    HIGHLY_INPUT_BOUND = "highly-input-bound"
    MODERATELY_INPUT_BOUND = "moderately-input-bound"
    COMPUTE_BOUND = "compute-bound"

    @classmethod
    def of(cls, input_wait_fraction: float) -> Verdict:
        """The verdict for a wait share, on TensorBoard's scale (20% and 5%)."""
        if input_wait_fraction >= HIGHLY_INPUT_BOUND_AT:
            return cls.HIGHLY_INPUT_BOUND
        if input_wait_fraction >= MODERATELY_INPUT_BOUND_AT:
            return cls.MODERATELY_INPUT_BOUND
        return cls.COMPUTE_BOUND


class Phase(str, Enum):
    """The three measurements of one configuration."""

    END_TO_END = "end_to_end"
    PIPELINE_ONLY = "pipeline_only"
    COMPUTE_ONLY = "compute_only"


@dataclasses.dataclass
class StepRecord:
    """One step: `wait_s` blocked on the next batch, then `compute_s` in the (synchronised) step."""

    start_s: float
    wait_s: float
    compute_s: float
    examples: int
    epoch: int
    warmup: bool

    @property
    def step_s(self) -> float:
        return self.wait_s + self.compute_s


@dataclasses.dataclass
class StepTimeStats:
    """Distribution of measured (post-warm-up) step times, in seconds."""

    mean_s: float
    p50_s: float
    p90_s: float
    p99_s: float
    min_s: float
    max_s: float


@dataclasses.dataclass
class Warmup:
    """What was excluded from the figures: from iterator creation to steady state.

    `converged` is False when step times had not settled by the end of warm-up (automatic
    detection hit its cap, or the run was too short to tell): the figures then include drift.
    """

    time_to_first_batch_s: float
    steps: int
    duration_s: float
    converged: bool


@dataclasses.dataclass
class PhaseResult:
    """Steady-state figures of one phase (end to end, pipeline only or compute only)."""

    phase: Phase
    steps: int
    examples: int
    duration_s: float
    examples_per_sec: float
    steps_per_sec: float
    wait_s: float
    compute_s: float
    input_wait_fraction: float
    step_time: StepTimeStats
    warmup: Warmup
    epochs_crossed: int
    records: list[StepRecord]
    #: The profile's time budget ended this phase before the steps it asked for were measured.
    cut_by_budget: bool = False


@dataclasses.dataclass
class TimedValue:
    """One sample of a time series: seconds since the profile started, and the value."""

    t_s: float
    value: float


@dataclasses.dataclass
class HostMemory:
    """Resident memory of this process and its children, sampled in the background."""

    peak_rss_bytes: int
    mean_rss_bytes: int
    total_bytes: int
    available_bytes: int
    samples: list[TimedValue]


@dataclasses.dataclass
class CpuUsage:
    """CPU time of this process and its children per wall second (100 = one busy core)."""

    mean_percent: float
    peak_percent: float
    cpu_count: int
    samples: list[TimedValue]


@dataclasses.dataclass
class GpuStats:
    """One visible GPU as NVML saw it during the profile; `None` where NVML does not report."""

    index: int
    name: str
    memory_total_bytes: int
    memory_used_peak_bytes: int
    memory_used_mean_bytes: int
    utilization_mean_percent: float | None
    utilization_peak_percent: float | None
    process_memory_peak_bytes: int | None
    tf_allocator_peak_bytes: int | None
    memory_samples: list[TimedValue]
    # Added after schema version 1 shipped: optional, so files written before it still load.
    # PyTorch's caching allocator at its peak (`torch.cuda.max_memory_allocated`), bytes;
    # None where torch did not use this GPU or the profile was not a PyTorch one.
    torch_allocator_peak_bytes: int | None = None


@dataclasses.dataclass
class Environment:
    """Versions and hardware of the machine that measured."""

    tfperf_version: str
    tensorflow_version: str | None
    python_version: str
    platform: str
    hostname: str
    cpu_count: int
    cpu_model: str
    gpu_names: list[str]
    # Added after schema version 1 shipped: optional, so files written before it still load.
    # PyTorch's version where it is installed (a DataLoader run's framework); else None.
    torch_version: str | None = None


class StageKind(str, Enum):
    """What a pipeline stage does, as far as advice goes; `other` covers the rest of tf.data."""

    SOURCE = "source"  # range, from_tensor_slices, from_tensors, from_generator
    READ = "read"  # TFRecordDataset, TextLineDataset, FixedLengthRecordDataset
    INTERLEAVE = "interleave"  # interleave, flat_map
    MAP = "map"
    FILTER = "filter"
    SHUFFLE = "shuffle"
    BATCH = "batch"  # batch, padded_batch, ragged batch, group_by_window, rebatch
    UNBATCH = "unbatch"
    CACHE = "cache"
    PREFETCH = "prefetch"
    REPEAT = "repeat"
    TAKE = "take"
    SKIP = "skip"
    SHARD = "shard"
    JOIN = "join"  # zip, concatenate, sample_from_datasets: several inputs measured as one
    OTHER = "other"
    WORKERS = "workers"  # a loader's worker processes starting (a DataLoader's epoch start)


class StageUnit(str, Enum):
    """What one element of a stage is, which decides how its elements count as examples."""

    EXAMPLE = "example"  # one element is one example (before batching)
    BATCH = "batch"  # one element holds examples along its first dimension, as the profiler counts
    INPUT = "input"  # an input a later stage expands (a file name): not counted in examples


@dataclasses.dataclass
class StageStat:
    """One stage of the pipeline, measured by running the pipeline cut right after it.

    Rates and CPU costs are those of the whole pipeline up to and including this stage (what the
    cut pipeline delivers); `added_s_per_example` and `added_cpu_s_per_example` are what this
    stage adds to the stage before it that counts examples. A field is `None` where it does not
    apply (examples of an `input` stage) or the stage could not be measured (`note` says why).

    Attributes:
        index: position in the pipeline, 0 for the source, in the order the data flows.
        kind: what the stage does (for advice and grouping).
        label: how the stage reads in code, e.g. `map(parse_jpeg)` or `TFRecordDataset`.
        location: `file:line` where the stage's function is defined, if it has one.
        parameters: its tf.data arguments, e.g. `{"num_parallel_calls": -1}` (-1 = AUTOTUNE).
        unit: what one element of this stage is.
        elements_per_sec: elements the cut pipeline delivers per second.
        examples_per_sec: the same in examples, comparable across stages and with the model.
        cpu_s_per_element: process CPU seconds per element while the cut pipeline ran.
        cpu_s_per_example: process CPU seconds per example while the cut pipeline ran.
        added_s_per_example: `1 / examples_per_sec` minus the same for the previous stage
            measured in examples; negative when this stage overlapped work (noise, or prefetch).
        added_cpu_s_per_example: `cpu_s_per_example` minus the previous stage's.
        elements: elements counted in the measured window.
        duration_s: length of the measured window (after warm-up), seconds.
        note: why figures are missing, or a caveat about them; None when there is none.
        calls_python: its function runs Python per element (tf.numpy_function or
            tf.py_function), so every call takes the GIL, whatever its parallelism.
        first_element_s: seconds from a fresh start of the cut pipeline to its first
            element: what a restart of the dataset waits for up to this stage; None when not
            measured.
    """

    index: int
    kind: StageKind
    label: str
    location: str | None
    parameters: dict[str, int | bool]
    unit: StageUnit
    elements_per_sec: float | None
    examples_per_sec: float | None
    cpu_s_per_element: float | None
    cpu_s_per_example: float | None
    added_s_per_example: float | None
    added_cpu_s_per_example: float | None
    elements: int
    duration_s: float
    note: str | None = None
    calls_python: bool = False
    first_element_s: float | None = None


@dataclasses.dataclass
class StageReport:
    """Every stage of the measured pipeline, in data-flow order, and which one limits it.

    Attributes:
        stages: from the source (index 0) to the pipeline's output.
        bottleneck_index: the stage that adds the most time per example (see docs/stages.md);
            None when no stage could be measured in examples.
        falls_short_index: the first stage after which the cut pipeline delivers fewer
            examples/s than the model consumes; None when all keep up or consumption is unknown.
        consumption_examples_per_sec: what the model consumes when input is free (the
            compute-only phase), None when that phase did not run.
        seconds_per_stage: measured window per stage, after `warmup_s` of warm-up.
        warmup_s: warm-up per stage excluded from its figures.
        duration_s: wall time the whole stage analysis took.
        note: a caveat on the whole analysis (a pipeline that branches), else None.
        advice: what to change at the limiting stage; empty when there is nothing to say.
        limiting_index: the limiting stage by the one rule of `limiting`, for readers of the
            JSON; set from the other fields whenever the record is made or read.
        unmeasured: indices of the stages the analysis's budget ended before measuring:
            nothing is concluded about them (their figures are None, their note says why).
    """

    stages: list[StageStat]
    bottleneck_index: int | None
    falls_short_index: int | None
    consumption_examples_per_sec: float | None
    seconds_per_stage: float
    warmup_s: float
    duration_s: float
    note: str | None
    advice: str
    limiting_index: int | None = None
    # Added with the budgeted cut order: results written before it list none.
    unmeasured: list[int] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        stage = self.limiting
        self.limiting_index = stage.index if stage is not None else None

    @property
    def bottleneck(self) -> StageStat | None:
        """The costliest stage (see `bottleneck_index`), or None."""
        return None if self.bottleneck_index is None else self.stages[self.bottleneck_index]

    @property
    def keeps_up(self) -> bool:
        """Whether the whole pipeline, run alone, delivers at least what the model consumes."""
        output = next(
            (s.examples_per_sec for s in reversed(self.stages) if s.examples_per_sec is not None),
            None,
        )
        consumption = self.consumption_examples_per_sec
        return consumption is not None and output is not None and output >= consumption

    @property
    def limiting(self) -> StageStat | None:
        """The limiting stage: the costliest, unless the pipeline keeps up with the model.

        One rule for every page (terminal, JSON readers, HTML): a pipeline that delivers what
        the model consumes has no limiting stage, only a costliest one.
        """
        return None if self.keeps_up else self.bottleneck


@dataclasses.dataclass
class AutotuneChoice:
    """One value tf.data's autotuner settled on, read from the live iterator's model.

    Attributes:
        stage_index: the `StageStat.index` of the stage it belongs to; None for a node tf.data
            added itself (an injected prefetch) or that could not be matched to a stage.
        stage_label: that stage's label, or tf.data's node name with "(added by tf.data)".
        node: tf.data's name for the operation in its model, e.g. `ParallelMapV2`.
        parameter: tf.data's name for the value: `parallelism`, `buffer_size`, `cycle_length`.
        argument: the argument of the user's call it stands for, e.g. `num_parallel_calls`.
        value: the value in use when it was read.
        tuned: True when the autotuner adjusts it while running; False when tf.data fixed it
            once from AUTOTUNE when the iterator was created (an interleave's `cycle_length`).
    """

    stage_index: int | None
    stage_label: str
    node: str
    parameter: str
    argument: str | None
    value: int
    tuned: bool


@dataclasses.dataclass
class AutotuneReadout:
    """The values AUTOTUNE chose, read at the end of the end-to-end phase.

    `choices` is empty and `unavailable_reason` says why when nothing could be read (autotuning
    off, a TensorFlow without `tf.data.experimental.get_model_proto`).
    """

    choices: list[AutotuneChoice]
    unavailable_reason: str | None = None


class EpochSource(str, Enum):
    """Where the length of a real epoch came from, for weighing the cost of a restart."""

    CARDINALITY = "cardinality"  # the dataset's own cardinality, in batches
    GIVEN = "epoch-steps"  # the user said so (`--epoch-steps`)
    OBSERVED = "observed"  # batches counted in one pass during the profile (cardinality unknown)


class RestartEvidence(str, Enum):
    """Whether the measured restarts say what one restart costs and what it waits for."""

    ENOUGH = "enough"  # enough restarts, sharing one cost
    FEW_RESTARTS = "few-restarts"  # fewer than the restart rules need to state a cost
    WIDE_SPREAD = "wide-spread"  # the restarts' waits share no one cost: a median stands for none
    UNRECORDED = "unrecorded"  # read from a result written before the evidence was recorded


@dataclasses.dataclass
class RestartCost:
    """What the dataset's restarts cost in the end-to-end phase, and what that is per real epoch.

    A finite dataset restarts at the end of every epoch; the first step after a restart waits
    for the pipeline to fill again (a shuffle buffer refilling, a parallel map ramping up). The
    profile window restarts as often as its few hundred records run out, which says nothing
    about a real epoch: the restart cost is measured apart and weighed by `epoch_steps`.

    Attributes:
        restarts: restarts measured in the end-to-end phase (after warm-up).
        seconds_per_restart: median wait of a first step after a restart (set-apart waits left
            out), beyond the steady wait.
        stage: label of the stage whose warm-up a restart repeats, e.g. `shuffle(10000)`; None
            when no stage of the pipeline explains it.
        stage_kind: that stage's kind, for the advice.
        steady_wait_s_per_step: mean wait of the other measured steps.
        steady_wait_fraction: wait share of step time without the restart steps.
        weighted_wait_fraction: wait share with one restart per `epoch_steps` steps: the figure
            the verdict follows.
        window_wait_share: share of the window's measured wait that fell on restart steps.
        epoch_steps: steps (batches) in one real epoch.
        epoch_source: where `epoch_steps` came from.
        weighted_examples_per_sec: end-to-end examples/s with the restart weighed by the epoch.
        measured: True when `stage` is the stage whose output was measured late after a
            fresh start (the stage analysis's first-element times); False when it was taken
            from the stage graph alone (no stage analysis ran).
        stage_own_s: that stage's own share of the time to the first batch after a fresh
            start, seconds; None when not measured.
        stage_sequential: the stage is a map or read that could run in parallel but is
            written to run on one thread.
        short_epoch: an epoch holds too few steps for the pipeline to reach a steady state
            (`tfperf.measure._restarts.SHORT_EPOCH_STEPS`): the wait is the epoch's own
            length, not a buffer refilling.
        restart_waits_s: the wait of every restart step counted in `seconds_per_restart`,
            seconds, in the order measured: the evidence and its spread.
        set_apart_waits_s: restart waits left out of the pipeline's restart cost, seconds:
            each waited far longer than any restart of the pipeline alone, so what it waited
            for was not the pipeline filling again (see `tfperf.measure._restarts`).
        evidence: whether the restarts are enough to state a cost and name a stage; when
            not, `stage` is None and `would_tell` says what would settle it.
        would_tell: what would settle a restart cost that cannot be told, e.g. more
            `--steps`; None when the evidence is enough.
        steady_steps: measured steps between restarts, from which the steady wait comes.
        pipeline_restarts: restarts measured in the pipeline-only phase; 0 when none.
        pipeline_restart_waits_s: the wait of each of them, seconds.
        pipeline_seconds_per_restart: the pipeline alone's restart cost, the median restart
            wait beyond its steady wait, seconds; None when the pipeline alone did not restart
            beyond a step.
    """

    restarts: int
    seconds_per_restart: float
    stage: str | None
    stage_kind: StageKind | None
    steady_wait_s_per_step: float
    steady_wait_fraction: float
    weighted_wait_fraction: float
    window_wait_share: float
    epoch_steps: int
    epoch_source: EpochSource
    weighted_examples_per_sec: float
    measured: bool = False
    stage_own_s: float | None = None
    stage_sequential: bool = False
    short_epoch: bool = False
    # Added with the restart evidence: results written before it load as UNRECORDED.
    restart_waits_s: list[float] = dataclasses.field(default_factory=list)
    set_apart_waits_s: list[float] = dataclasses.field(default_factory=list)
    evidence: RestartEvidence = RestartEvidence.UNRECORDED
    would_tell: str | None = None
    steady_steps: int = 0
    pipeline_restarts: int = 0
    pipeline_restart_waits_s: list[float] = dataclasses.field(default_factory=list)
    pipeline_seconds_per_restart: float | None = None

    @property
    def evidence_enough(self) -> bool:
        """Whether the restarts measured are enough to state their cost and name a stage."""
        return self.evidence is RestartEvidence.ENOUGH

    @property
    def waiting_on(self) -> str:
        """What a restart waits for, in words: `" while shuffle(640) fills again"`, or
        `" while waiting for map(decode)"` for a stage measured late; "" when none is known."""
        if self.stage is None:
            return ""
        refills = self.stage_kind in (StageKind.SHUFFLE, StageKind.CACHE)
        if self.measured and not refills:
            return f" while waiting for {self.stage}"
        return f" while {self.stage} fills again"

    @property
    def dominates(self) -> bool:
        """Whether restarts cost more wait per real epoch than the steady steps do."""
        return self.seconds_per_restart / self.epoch_steps > self.steady_wait_s_per_step


@dataclasses.dataclass
class BatchShape:
    """One shape the end-to-end phase's batches came in, and how the train step met it.

    Attributes:
        shape: the shapes of the batch's tensors, e.g. `(32, 17), (32,)`.
        steps: end-to-end steps whose batch had this shape.
        examples: examples in one such batch.
        first_compute_s: compute time of the first step with this shape: a `tf.function`
            traces once per new shape, so this includes any retracing.
        typical_compute_s: median compute time of the later steps with this shape; None when
            the shape came once.
    """

    shape: str
    steps: int
    examples: int
    first_compute_s: float
    typical_compute_s: float | None

    @property
    def retrace_s(self) -> float:
        """Compute time this shape's first step took beyond its typical step (0 if it came once).

        A `tf.function` (Keras' train step among them) traces again for every new input shape;
        this is what that trace cost.
        """
        if self.typical_compute_s is None:
            return 0.0
        return max(0.0, self.first_compute_s - self.typical_compute_s)


@dataclasses.dataclass
class DatasetOptions:
    """The tf.data options the built dataset carries, whoever set them (tfperf or the pipeline).

    One value per knob that is a tf.data option, by knob name: the first two as fields (as
    results have always stored them), any later one in `others`. `None` means the option was
    left unset, i.e. tf.data's default (each knob's declaration says what that is; autotune:
    on).
    """

    deterministic: bool | None = None
    private_threadpool_size: int | None = None
    autotune: bool | None = None
    others: dict[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, carried: Mapping[str, Any], *, autotune: bool | None) -> DatasetOptions:
        """The record of `carried` (knob name -> the value the dataset carries)."""
        own = {name: value for name, value in carried.items() if name in _OPTION_FIELDS}
        others = {name: value for name, value in carried.items() if name not in _OPTION_FIELDS}
        return cls(**own, autotune=autotune, others=others)

    def carried(self, name: str) -> Any:
        """The value the dataset carries for knob `name`; None when unset or not an option."""
        return getattr(self, name) if name in _OPTION_FIELDS else self.others.get(name)


@dataclasses.dataclass
class LoaderReport:
    """What a loader whose work runs in worker processes (a PyTorch `DataLoader`) adds.

    Attributes:
        workers: worker processes it ran with (0: items loaded in the trainer).
        persistent_workers: whether its workers outlive an epoch; without, each epoch (each
            pass the profile restarts) starts them again.
        first_batch_s: seconds from a fresh pass's start to its first batch, workers started.
        item_function: what loads one item, e.g. `Blocking.__getitem__`.
        item_where: where that is written, `pipeline.py:14`; None when not found.
        wall_s_per_item: wall seconds to load one item in the trainer, measured apart.
        cpu_s_per_item: CPU seconds of that: far below the wall time, the item waits (a
            blocking read) and workers beyond the cores still help.
        collate_wall_s_per_batch: seconds of one `collate_fn` call; None: not measured.
        workers_estimate: workers that keep the limit's rate in flight (Little's law on
            `wall_s_per_item`); None when not estimated.
        host_ram_peak_bytes: peak host RAM of the trainer and its workers, pages the
            workers share with the trainer counted once (trainer RSS + workers' private
            pages); None when not sampled.
        workers_ram_peak_bytes: the workers' private pages in that peak.
        copy_bytes_per_batch: bytes of one batch's tensors, copied host to GPU; None: no
            CUDA in the profiled process, so no copy was timed.
        copy_s_per_batch: median seconds to copy them from pageable memory
            (`.to("cuda")`, then a synchronise).
        pinned_copy_s_per_batch: median seconds from pinned memory (`.pin_memory()` once,
            then `.to("cuda", non_blocking=True)` and a synchronise).
        pass_check: an `IterableDataset`'s pass under these workers against the dataset
            read once in the trainer (duplicated or dropped examples); None: not checked
            (no workers, or a map-style dataset, which a sampler shards).
        worker_memory: the workers' private bytes and /dev/shm at the start and the end of
            a pass (copy-on-write growth); None: no workers, or not read.
    """

    workers: int
    persistent_workers: bool
    first_batch_s: float | None = None
    item_function: str | None = None
    item_where: str | None = None
    wall_s_per_item: float | None = None
    cpu_s_per_item: float | None = None
    collate_wall_s_per_batch: float | None = None
    workers_estimate: int | None = None
    host_ram_peak_bytes: int | None = None
    workers_ram_peak_bytes: int | None = None
    copy_bytes_per_batch: int | None = None
    copy_s_per_batch: float | None = None
    pinned_copy_s_per_batch: float | None = None
    pass_check: PassCheck | None = None
    worker_memory: WorkerMemory | None = None

    @property
    def items_wait(self) -> bool | None:
        """Whether an item mostly waits on something other than the CPU (a blocking read).

        True when its CPU time is under half its wall time: then workers beyond the cores
        still help. None when the items were not timed.
        """
        if self.wall_s_per_item is None or self.cpu_s_per_item is None:
            return None
        return self.cpu_s_per_item < self.wall_s_per_item / 2


#: The knobs `DatasetOptions` keeps as fields of their own: all but autotune and `others`.
_OPTION_FIELDS = frozenset(field.name for field in dataclasses.fields(DatasetOptions)) - {
    "autotune",
    "others",
}


@dataclasses.dataclass
class ProfileResult(JsonRecord):
    """Everything one profile measured. Save with `save`, read back with `ProfileResult.load`.

    `pipeline_only` and `compute_only` are `None` when the profile measured only the user's own
    loop (`tfperf.Profiler`); `speedup_if_input_free` and `compute_slowdown` are then `None`.
    `compute_slowdown` is how many times longer a step computes end to end than on a cached
    batch: well above 1, input work competes with training for the CPU. `host_memory` and
    `cpu` are `None` only when the host probe did not run; `probes` says, for each probe, "ok"
    or why it was off. `stages` holds the per-stage analysis (None when it did not run, as in
    tuning trials or with `--no-stages`); `autotune` the values AUTOTUNE settled on (None when
    the profile did not read them, e.g. through `tfperf.profile` on a user's own loop).
    """

    pipeline: str
    knobs: dict[str, Any]
    verdict: Verdict
    input_wait_fraction: float
    speedup_if_input_free: float | None
    compute_slowdown: float | None
    advice: str
    end_to_end: PhaseResult
    pipeline_only: PhaseResult | None
    compute_only: PhaseResult | None
    host_memory: HostMemory | None
    cpu: CpuUsage | None
    gpus: list[GpuStats]
    gpu_unavailable_reason: str | None
    environment: Environment
    probes: dict[str, str]
    created_at: str
    schema_version: int = SCHEMA_VERSION
    # Added after schema version 1 shipped: optional, so files written before them still load.
    stages: StageReport | None = None
    autotune: AutotuneReadout | None = None
    # The best this pipeline can do on this machine, from the pipeline model.
    limit: Limit | None = None
    # What restarts of a finite dataset cost, weighed by a real epoch; None when none happened.
    restarts: RestartCost | None = None
    # The shapes the end-to-end batches came in (the compute-only phase replays them so).
    batch_shapes: list[BatchShape] = dataclasses.field(default_factory=list)
    # The options the built dataset carries (None when not read, e.g. `tfperf.profile`).
    dataset_options: DatasetOptions | None = None
    # The model alone under other training settings (the tuner's baseline trial asks for them).
    training_rates: list[TrainingRate] = dataclasses.field(default_factory=list)
    # Examples/s and input wait at 1, 2, 4, ... replicas (`tfperf profile --scaling`), else None.
    scaling: ScalingCurve | None = None
    # The strategy it trained under, its replicas and per-replica figures; None: no strategy.
    distribution: Distribution | None = None
    # What each buffering stage holds in host memory, beside the peak RSS; None: not read.
    memory: MemoryAccount | None = None
    # The time budget the measurement was sized to (`--budget`), seconds; None: none.
    budget_s: float | None = None
    # Seconds per step of the emulated accelerator (`--step-time`): the training step was a
    # sleep of this length, no model ran. None: the pipeline's own step was measured.
    emulated_step_s: float | None = None
    # The accelerator's utilisation against MLPerf Storage's bar (`--step-time`,
    # `--accelerator-speedup`); None when not asked for.
    utilisation: Utilisation | None = None
    # A loader with worker processes (a DataLoader): its items, workers and first batch.
    loader: LoaderReport | None = None
    # What tfperf says about these figures, each with its evidence (`tfperf.findings`), and
    # the figures that disagreed with the weaker statement printed instead.
    findings: list[Finding] = dataclasses.field(default_factory=list)
    conflicts: list[Conflict] = dataclasses.field(default_factory=list)
    # The call sites found in a plain file or a script, as written; None for a knobs file.
    discovery: Discovery | None = None

    @property
    def end_to_end_over_pipeline(self) -> float | None:
        """End to end's rate over the pipeline alone's, where it is above it beyond the noise
        (`RATE_NOISE`); None otherwise.

        End to end runs the same pipeline with a model beside it, so it cannot truly be the
        faster: above it beyond the noise, the two phases ran under different conditions (a
        busier machine during one of them), and the page says so instead of showing both.
        """
        alone = self.pipeline_only
        if alone is None or alone.examples_per_sec <= 0:
            return None
        ratio = self.end_to_end.examples_per_sec / alone.examples_per_sec
        return ratio if ratio > 1 + RATE_NOISE else None

    def phases(self) -> list[PhaseResult]:
        """The phases that were measured, in the order they ran."""
        found = (self.end_to_end, self.pipeline_only, self.compute_only)
        return [phase for phase in found if phase is not None]

    def gpu_memory_advice(self) -> list[GpuMemoryAdvice]:
        """A per-process `memory_limit` for each measured GPU; empty when none was measured.

        Derived from `gpus` whenever asked (see `tfperf.results.gpu_memory_advice`), so a saved
        result gets it too; `to_dict` writes it for JSON readers, and loading ignores it.
        """
        from tfperf.results._gpu_memory import MemoryApi, gpu_memory_advice

        # The one rule for the advice's words: only a DataLoader profile records a loader.
        api = MemoryApi.TORCH if self.loader is not None else MemoryApi.TENSORFLOW
        found = (gpu_memory_advice(gpu, api=api) for gpu in self.gpus)
        return [advice for advice in found if advice is not None]

    def host_copy(self) -> HostCopy | None:
        """The host-to-GPU copy of one batch, pageable and pinned; None when none was timed.

        Derived from `loader` and the `pin_memory` knob whenever asked, as
        `gpu_memory_advice` is, so a saved result gets its words too.
        """
        from tfperf.results._gpu_memory import host_copy

        return host_copy(self.loader, self.knobs.get("pin_memory"))

    def to_dict(self) -> dict[str, Any]:
        """The JSON record, plus `gpu_memory_advice` derived from `gpus` (never read back)."""
        data = super().to_dict()
        data["gpu_memory_advice"] = [advice.to_dict() for advice in self.gpu_memory_advice()]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProfileResult:
        """Validates and rebuilds a result from `to_dict` output."""
        version = data.get("schema_version") if isinstance(data, dict) else None
        if version != SCHEMA_VERSION:
            raise ResultFileError(
                f"result has schema_version {version!r}, but this tfperf reads version "
                f"{SCHEMA_VERSION}. Re-run `tfperf profile`, or use the tfperf that wrote it."
            )
        return cls.validate(data)

    @classmethod
    def from_json(cls, text: str) -> ProfileResult:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise ResultFileError(f"result is not valid JSON: {error}") from None
        return cls.from_dict(data)

    @classmethod
    def load(cls, path: str | Path) -> ProfileResult:
        """Reads a result written by `save` (or `tfperf profile --json`).

        Raises:
            ResultFileError: the file is missing, not JSON, or not a tfperf result.
        """
        source = Path(path)
        try:
            text = source.read_text(encoding="utf-8")
        except OSError as error:
            raise ResultFileError(f"cannot read result file {source}: {error.strerror}") from None
        try:
            return cls.from_json(text)
        except ResultFileError as error:
            raise ResultFileError(f"{source}: {error}") from None

    def to_frame(self) -> pd.DataFrame:
        """One row per step of every phase, warm-up steps included and flagged.

        Columns: phase, step, start_s, wait_s, compute_s, step_s, examples, epoch, warmup.
        """
        import pandas as pd

        rows = [
            {
                "phase": phase.phase.value,
                "step": number,
                "start_s": record.start_s,
                "wait_s": record.wait_s,
                "compute_s": record.compute_s,
                "step_s": record.step_s,
                "examples": record.examples,
                "epoch": record.epoch,
                "warmup": record.warmup,
            }
            for phase in self.phases()
            for number, record in enumerate(phase.records)
        ]
        columns = ["phase", "step", "start_s", "wait_s", "compute_s", "step_s", "examples"]
        frame: pd.DataFrame = pd.DataFrame(rows, columns=[*columns, "epoch", "warmup"])
        return frame
