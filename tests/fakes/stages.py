"""Stage statistics a test makes instead of measuring: a rate and a first-element time each."""

from __future__ import annotations

from typing import Any

from tfperf.results.stages import StageKind, StageStat, StageUnit


def first_element_stat(
    index: int,
    kind: StageKind,
    label: str,
    first_s: float,
    rate: float,
    parameters: dict[str, Any] | None = None,
    elements: int = 10,
) -> StageStat:
    """A cut of the pipeline that ran `rate` examples/s and gave its first element after
    `first_s` seconds on a fresh iterator: what restart attribution reads."""
    return StageStat(
        index=index,
        kind=kind,
        label=label,
        location=None,
        parameters=parameters or {},
        unit=StageUnit.EXAMPLE,
        elements_per_sec=rate,
        examples_per_sec=rate,
        cpu_s_per_element=None,
        cpu_s_per_example=None,
        added_s_per_example=None,
        added_cpu_s_per_example=None,
        elements=elements,
        duration_s=0.5,
        first_element_s=first_s,
    )
