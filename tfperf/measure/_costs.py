"""What each stage costs per example, for one thread of it, from the stage analysis.

The stage analysis gives the wall time and the CPU time a stage adds per example, at the
parallelism the profiled configuration ran it with. One thread of the stage then spends
`wall = added wall x parallelism` per example, of which `cpu = added CPU` computes; the rest
blocks (a read from remote storage, a sleep, a remote call).
"""

from __future__ import annotations

import dataclasses

from tfperf.knobs import AUTOTUNE, TUNABLE, SiteKind
from tfperf.measure._policy import POLICY
from tfperf.results.stages import AutotuneReadout, StageKind, StageReport, StageStat


@dataclasses.dataclass(frozen=True)
class StageCost:
    """What one stage costs per example, for one thread of it.

    Attributes:
        index, label, kind: the stage, as in its `StageStat`.
        argument: the parallelism argument the stage takes (`num_parallel_calls`, ...), or
            None for a stage that runs sequentially.
        tuned_argument: the parallelism argument tuning sets on it: `argument`, else the one
            a call of its method that leaves it out is tuned by (`knobs.TUNABLE`: a map's
            `num_parallel_calls`, a reader's `num_parallel_reads`); None: tuning leaves it
            sequential.
        parallelism: threads it ran with when measured (AUTOTUNE resolved where read).
        wall_s_per_example: wall seconds one thread spends per example.
        cpu_s_per_example: CPU seconds it spends per example.
        threads: Little's-law threads to sustain the model's target rate (1 when sequential).
        calls_python: its function runs Python per element.
        upstream_s_per_example: seconds per example of the pipeline cut after the nearest
            asynchronous stage before this one (a parallel map or read, a prefetch), which runs
            beside it on threads of its own; 0.0 when none precedes it.
        parallelisable: tuning can run it in parallel (`ModelPolicy.parallelisable`, or it
            takes a parallelism argument), even where the pipeline runs it sequentially.
    """

    index: int
    label: str
    kind: StageKind
    argument: str | None
    parallelism: int
    wall_s_per_example: float
    cpu_s_per_example: float
    threads: int = 1
    calls_python: bool = False
    upstream_s_per_example: float = 0.0
    parallelisable: bool = False
    tuned_argument: str | None = None

    @property
    def blocking(self) -> bool:
        """Whether the stage mostly waits (I/O, sleeps) rather than computes."""
        return self.wall_s_per_example > POLICY.blocking_ratio * max(self.cpu_s_per_example, 0.0)


def stage_costs(
    report: StageReport, parallelism_of: dict[int, int] | None = None
) -> list[StageCost]:
    """One `StageCost` per stage that adds time per example and could be measured.

    Args:
        report: the stage analysis of the profiled configuration.
        parallelism_of: stage index -> threads it ran with, for stages set to AUTOTUNE
            (from the AUTOTUNE read-out); missing ones count as one thread.
    """
    costs = []
    upstream = 0.0
    for stat in report.stages:
        added, cpu = stat.added_s_per_example, stat.added_cpu_s_per_example
        argument = _parallel_argument(stat)
        if added is not None and added > 0:
            threads = _measured_parallelism(stat, argument, parallelism_of or {})
            costs.append(
                StageCost(
                    index=stat.index,
                    label=stat.label,
                    kind=stat.kind,
                    argument=argument,
                    parallelism=threads,
                    wall_s_per_example=added * threads,
                    cpu_s_per_example=max(cpu or 0.0, 0.0),
                    calls_python=stat.calls_python,
                    upstream_s_per_example=upstream,
                    parallelisable=argument is not None or stat.method in POLICY.parallelisable,
                    tuned_argument=argument or _tuned_when_left_out(stat.method),
                )
            )
        if _asynchronous(stat) and stat.examples_per_sec:
            upstream = 1 / stat.examples_per_sec
    return costs


def autotuned_parallelism(readout: AutotuneReadout | None) -> dict[int, int]:
    """Stage index -> the parallelism AUTOTUNE chose for it, where the read-out says."""
    if readout is None:
        return {}
    return {
        choice.stage_index: int(choice.value)
        for choice in readout.choices
        if choice.stage_index is not None
        and choice.argument in POLICY.parallel_arguments
        and choice.value > 0
    }


def _asynchronous(stat: StageStat) -> bool:
    """Whether a stage runs on threads of its own, apart from its consumer's thread."""
    return stat.kind is StageKind.PREFETCH or any(
        a in stat.parameters for a in POLICY.async_arguments
    )


def _tuned_when_left_out(method: str) -> str | None:
    """The parallelism argument tuning gives a call of `method` that leaves it out."""
    tuned = (
        argument
        for (call, argument), (kind, when_left_out) in TUNABLE.items()
        if call == method and kind is SiteKind.PARALLELISM and when_left_out
    )
    return next(tuned, None)


def _parallel_argument(stat: StageStat) -> str | None:
    return next((a for a in POLICY.parallel_arguments if a in stat.parameters), None)


def _measured_parallelism(stat: StageStat, argument: str | None, autotuned: dict[int, int]) -> int:
    if argument is None:
        return 1
    value = int(stat.parameters[argument])
    if value == AUTOTUNE:
        return autotuned.get(stat.index, 1)
    return max(1, value)
