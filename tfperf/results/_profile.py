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
from tfperf.results._restarts import RestartCost
from tfperf.results._scaling import ScalingCurve
from tfperf.results._stages import AutotuneReadout, BatchShape, DatasetOptions, StageReport
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
        collate_cpu_s_per_batch: CPU seconds of that call; None: not measured.
        collate_function: the collate function's name (`default_collate` when none is given).
        collate_where: where it is written, as `item_where`.
        items_per_batch: items one `collate_fn` call gathers (the loader's `batch_size`, 1
            where an item is a batch itself).
        workers_estimate: workers beyond which more add no speed here: Little's law on
            `wall_s_per_item` at twice the step's rate, capped where the cores run out (a
            computing item's workers then keep the cores busy, not the step fed); None when
            not estimated.
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
        one_thread_examples_per_sec: the train step alone on a cached batch with one
            operator thread; None: not timed (the trainer's threads were set, or it failed).
        examples_per_item: examples one item holds: a full batch's examples over the items
            it batches; above 1 where an item is a batch itself (`batch_size=None`).
        built_anew: the script's loop that builds the loader anew for each pass
            (`train.py:16`): each pass starts its workers, `persistent_workers` or not; None
            where it is built once, or the syntax does not say.
    """

    workers: int
    persistent_workers: bool
    first_batch_s: float | None = None
    item_function: str | None = None
    item_where: str | None = None
    wall_s_per_item: float | None = None
    cpu_s_per_item: float | None = None
    collate_wall_s_per_batch: float | None = None
    collate_cpu_s_per_batch: float | None = None
    collate_function: str | None = None
    collate_where: str | None = None
    items_per_batch: int = 1
    workers_estimate: int | None = None
    host_ram_peak_bytes: int | None = None
    workers_ram_peak_bytes: int | None = None
    copy_bytes_per_batch: int | None = None
    copy_s_per_batch: float | None = None
    pinned_copy_s_per_batch: float | None = None
    pass_check: PassCheck | None = None
    worker_memory: WorkerMemory | None = None
    one_thread_examples_per_sec: float | None = None
    examples_per_item: float = 1.0
    built_anew: str | None = None

    @property
    def load_wall_s_per_item(self) -> float | None:
        """Wall seconds a worker spends per item: the item and its share of the collate
        call; None when the items were not timed."""
        return _with_share(self.wall_s_per_item, self.collate_wall_s_per_batch, self)

    @property
    def load_cpu_s_per_item(self) -> float | None:
        """CPU seconds a worker spends per item, as `load_wall_s_per_item`."""
        return _with_share(self.cpu_s_per_item, self.collate_cpu_s_per_batch, self)

    @property
    def collate_dominates(self) -> bool:
        """Whether the collate call's share of a worker's CPU outweighs the items' own."""
        share = _with_share(0.0, self.collate_cpu_s_per_batch, self) or 0.0
        return self.cpu_s_per_item is not None and share > self.cpu_s_per_item

    @property
    def items_wait(self) -> bool | None:
        """Whether loading an item (with its share of collate) mostly waits on something
        other than the CPU (a blocking read).

        True when its CPU time is under half its wall time: then workers beyond the cores
        still help. None when the items were not timed.
        """
        wall, cpu = self.load_wall_s_per_item, self.load_cpu_s_per_item
        if wall is None or cpu is None:
            return None
        return cpu < wall / 2


def _with_share(item: float | None, batch: float | None, loader: LoaderReport) -> float | None:
    """`item` seconds plus one item's share of `batch` seconds (none when not measured)."""
    if item is None:
        return None
    return item + (batch or 0.0) / max(loader.items_per_batch, 1)


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
    # The user's files their code changed while tfperf ran it, each put back as it was when
    # the run ended, and the files it created and left (absolute paths; `tfperf.kept`).
    files_put_back: list[str] = dataclasses.field(default_factory=list)
    files_created: list[str] = dataclasses.field(default_factory=list)
    # Where a script's loop hands its data to `itertools.cycle` (`train.py:21`), which replays
    # the first pass's batches; None where it does not, or the code does not say.
    cycled: str | None = None

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

        Derived from `gpus` whenever asked (`_gpu_memory.gpu_memory_advice`), so a saved
        result gets it too; `to_dict` writes it for JSON readers, and loading ignores it.
        """
        from tfperf.results._gpu_memory import MemoryApi, gpu_memory_advice

        # Worded for the allocator whose peak was read: PyTorch's records its own.
        torch = any(gpu.torch_allocator_peak_bytes is not None for gpu in self.gpus)
        api = MemoryApi.TORCH if torch else MemoryApi.TENSORFLOW
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
