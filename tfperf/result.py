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
from tfperf.jsonrecord import JsonRecord

if TYPE_CHECKING:
    import pandas as pd

SCHEMA_VERSION = 1


class Verdict(str, Enum):
    """Where the step time goes, on the scale of TensorBoard's input-pipeline analyser."""

    HIGHLY_INPUT_BOUND = "highly-input-bound"
    MODERATELY_INPUT_BOUND = "moderately-input-bound"
    COMPUTE_BOUND = "compute-bound"


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


@dataclasses.dataclass
class ProfileResult(JsonRecord):
    """Everything one profile measured. Save with `save`, read back with `ProfileResult.load`.

    `pipeline_only` and `compute_only` are `None` when the profile measured only the user's own
    loop (`tfperf.Profiler`); `speedup_if_input_free` and `compute_slowdown` are then `None`.
    `compute_slowdown` is how many times longer a step computes end to end than on a cached
    batch: well above 1, input work competes with training for the CPU. `host_memory` and
    `cpu` are `None` only when the host probe did not run; `probes` says, for each probe, "ok"
    or why it was off.
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

    def phases(self) -> list[PhaseResult]:
        """The phases that were measured, in the order they ran."""
        found = (self.end_to_end, self.pipeline_only, self.compute_only)
        return [phase for phase in found if phase is not None]

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
