"""Inputs for the report tests: a profile measured on a fake clock, and a real Optuna study.

The study is written through Optuna's public API with the attributes tfperf's tuner stores
(see tfperf/study.py), so the report reads it exactly as it reads a study `tfperf tune` made.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import optuna

from tests.fakes.clock import FakeClock, TimedData, timed_step
from tfperf.findings import conclude
from tfperf.knobs import AUTOTUNE, Knobs
from tfperf.measure._profiler import profile
from tfperf.probes import HostProbe
from tfperf.results import GpuStats, ProfileResult, TimedValue
from tfperf.results.stages import (
    AutotuneChoice,
    AutotuneReadout,
    StageKind,
    StageReport,
    StageStat,
    StageUnit,
)
from tfperf.results.tune import Measurement, Objective
from tfperf.study.records import StudyRecord, write_study

MIB = 1024**2
RAM_BUDGET = 2048 * MIB


def fake_profile(pipeline: str = "demo.py", gpu: bool = False) -> ProfileResult:
    """Input takes 20 ms per batch of 4 and a step computes 10 ms: highly input-bound."""
    clock = FakeClock()
    result = profile(
        TimedData(clock, [0.02] * 8, batch=4),
        timed_step(clock, 0.01),
        steps=5,
        warmup=2,
        clock=clock,
        probes=[HostProbe()],
        pipeline=pipeline,
        knobs=Knobs(batch_size=4).to_dict(),
    )
    if gpu:
        result = dataclasses.replace(result, gpus=[fake_gpu()], gpu_unavailable_reason=None)
    return result


def with_stages(result: ProfileResult) -> ProfileResult:
    """`result` with a stage analysis (a slow map) and AUTOTUNE's choices attached."""

    def stage(index, kind, label, unit, rate, added):
        return StageStat(
            index=index,
            kind=kind,
            label=label,
            location="demo.py:12" if kind is StageKind.MAP else None,
            parameters={},
            unit=unit,
            elements_per_sec=rate,
            examples_per_sec=None if unit is StageUnit.INPUT else rate,
            cpu_s_per_element=None,
            cpu_s_per_example=None if rate is None else 1 / rate,
            added_s_per_example=added,
            added_cpu_s_per_example=None,
            elements=100,
            duration_s=0.5,
        )

    stages = StageReport(
        stages=[
            stage(0, StageKind.SOURCE, "from_tensor_slices", StageUnit.INPUT, 9000.0, None),
            stage(
                1, StageKind.READ, "interleave(TFRecordDataset)", StageUnit.EXAMPLE, 5000.0, None
            ),
            stage(2, StageKind.MAP, "map(parse)", StageUnit.EXAMPLE, 200.0, 0.0048),
            stage(3, StageKind.BATCH, "batch(4)", StageUnit.BATCH, 190.0, 0.0003),
        ],
        bottleneck_index=2,
        falls_short_index=2,
        consumption_examples_per_sec=400.0,
        seconds_per_stage=0.5,
        warmup_s=0.2,
        duration_s=3.0,
        note=None,
        advice="The limiting stage is map(parse): it adds 4.8 ms per example.",
    )
    choice = AutotuneChoice(
        2, "map(parse)", "ParallelMapV2", "parallelism", "num_parallel_calls", 2, True
    )
    return conclude(dataclasses.replace(result, stages=stages, autotune=AutotuneReadout([choice])))


def fake_gpu() -> GpuStats:
    return GpuStats(
        index=0,
        name="NVIDIA H100 80GB HBM3",
        memory_total_bytes=80 * 1024 * MIB,
        memory_used_peak_bytes=3 * 1024 * MIB,
        memory_used_mean_bytes=2 * 1024 * MIB,
        utilization_mean_percent=41.0,
        utilization_peak_percent=97.0,
        process_memory_peak_bytes=3 * 1024 * MIB,
        tf_allocator_peak_bytes=2 * 1024 * MIB,
        memory_samples=[TimedValue(0.0, 1024 * MIB), TimedValue(0.5, 3 * 1024 * MIB)],
    )


@dataclasses.dataclass
class Planned:
    """One trial to write: examples/s (None unless it completed), knobs, how it ended."""

    knobs: Knobs
    examples_per_sec: float | None
    status: str = "complete"
    peak_mib: int = 500
    reference: str | None = None
    reason: str | None = None
    host: str = "node-a"


BASELINE = Knobs(batch_size=32, num_parallel_calls=1, cycle_length=1, prefetch=0)
AUTO = Knobs(batch_size=32)
PLAN = (
    Planned(BASELINE, 1000.0, reference="baseline", peak_mib=400),
    Planned(AUTO, 1500.0, reference="autotune", peak_mib=420),
    Planned(Knobs(batch_size=64, num_parallel_calls=4, prefetch=2), 2000.0, peak_mib=450),
    Planned(Knobs(batch_size=32, num_parallel_calls=2, prefetch=AUTOTUNE), 1800.0, peak_mib=380),
    Planned(Knobs(batch_size=32, shuffle_buffer=9000), None, "ram-budget", 2600, reason="over"),
    Planned(Knobs(batch_size=16, num_parallel_calls=8), None, "failed", reason="boom"),
    Planned(Knobs(batch_size=64, num_parallel_calls=2), 1200.0, peak_mib=600),
)


def make_study(
    storage: Any = None,
    name: str = "demo",
    plan: tuple[Planned, ...] = PLAN,
    remeasure: bool = True,
    pipeline: str = "demo.py",
    best_result: ProfileResult | None = None,
) -> optuna.Study:
    """A finished study of `plan`; trial 2 is the best and carries `best_result`."""
    study = optuna.create_study(storage=storage, study_name=name, direction="maximize")
    write_study(study, StudyRecord(pipeline=pipeline, objective=Objective.THROUGHPUT))
    for number, planned in enumerate(plan):
        study.add_trial(_frozen(planned, best_result if number == 2 else None))
    if remeasure:
        measured = [Measurement(**item) for item in _remeasured(plan)]
        write_study(study, StudyRecord(remeasured=measured))
    return study


def _frozen(planned: Planned, result: ProfileResult | None) -> optuna.trial.FrozenTrial:
    state = optuna.trial.TrialState
    peak = planned.peak_mib * MIB
    attrs: dict[str, Any] = {
        "knobs": planned.knobs.to_dict(),
        "status": planned.status,
        "reason": planned.reason,
        "peak_rss_bytes": peak,
        "peak_gpu_bytes": None,
        "wall_s": 3.5,
        "worker": {"host": planned.host, "pid": 1234},
    }
    if planned.reference:
        attrs["reference"] = planned.reference
    if result is not None:
        attrs["result"] = result.to_json(indent=None)
    complete = planned.status in ("complete", "ram-budget")
    value = planned.examples_per_sec if planned.status == "complete" else 0.0
    return optuna.trial.create_trial(
        state=state.COMPLETE if complete else state.FAIL,
        value=value if complete else None,
        params={"num_parallel_calls": planned.knobs.num_parallel_calls},
        distributions={"num_parallel_calls": optuna.distributions.IntDistribution(-1, 64)},
        user_attrs=attrs,
        constraints={
            "ram_bytes_over_budget": float(peak - RAM_BUDGET),
            "gpu_bytes_over_budget": 0.0,
        },
    )


def _remeasured(plan: tuple[Planned, ...]) -> list[dict[str, Any]]:
    def measured(label: str, number: int, values: list[float]) -> dict[str, Any]:
        return {
            "label": label,
            "trial_number": number,
            "knobs": plan[number].knobs.to_dict(),
            "examples_per_sec": values,
            "peak_rss_bytes": plan[number].peak_mib * MIB,
            "peak_gpu_bytes": None,
        }

    return [
        measured("trial 2", 2, [1900.0, 2000.0, 2100.0]),
        measured("baseline", 0, [990.0, 1000.0, 1010.0]),
        measured("autotune", 1, [1400.0, 1500.0, 1600.0]),
    ]


def stored_json(study: optuna.Study, number: int) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(study.trials[number].user_attrs["result"])
    return data
