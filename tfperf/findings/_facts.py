"""The facts of a profiled pipeline that a finding checks before it is made.

Read from the stage analysis (the stages in data-flow order, their kinds and arguments) and
from what AUTOTUNE was read to choose: where `cache()` sits, whether a map already runs on
batches, whether the pipeline reads files or has a prefetch, and how many threads a stage
really ran on. One place answers each question, so two findings cannot answer it twice.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from tfperf.knobs import TUNABLE
from tfperf.results import ProfileResult
from tfperf.results.stages import AutotuneReadout, StageKind, StageStat, StageUnit

#: Kinds whose work a parallelism argument spreads over threads, and that argument's name.
PARALLEL_ARGUMENT = {
    StageKind.MAP: "num_parallel_calls",
    StageKind.INTERLEAVE: "num_parallel_calls",
    StageKind.READ: "num_parallel_reads",
    StageKind.BATCH: "num_parallel_calls",
}
#: AUTOTUNE's parameter that stands for a stage's parallelism in its read-out.
_PARALLELISM = frozenset({"parallelism", "num_parallel_calls", "num_parallel_reads"})


@dataclasses.dataclass(frozen=True)
class PipelineFacts:
    """What the profile knows of the pipeline's graph; empty when no stage analysis ran."""

    stages: tuple[StageStat, ...]
    autotuned: dict[int, int]  # stage index -> parallelism AUTOTUNE was read to run
    knob_prefetch: object  # the `prefetch` knob's value, where the pipeline has that knob
    autotune_read: bool  # AUTOTUNE's choices were read from the running pipeline

    @classmethod
    def of(cls, result: ProfileResult) -> PipelineFacts:
        """The facts of `result`'s pipeline."""
        stages = result.stages.stages if result.stages is not None else []
        return cls.from_parts(stages, result.autotune, result.knobs.get("prefetch"))

    @classmethod
    def from_parts(
        cls,
        stages: Sequence[StageStat],
        autotune: AutotuneReadout | None = None,
        knob_prefetch: object = None,
    ) -> PipelineFacts:
        """The facts from the stage analysis and AUTOTUNE's read-out, where they were taken."""
        autotuned: dict[int, int] = {}
        for choice in autotune.choices if autotune is not None else []:
            if choice.stage_index is not None and choice.parameter in _PARALLELISM:
                autotuned[choice.stage_index] = choice.value
        read = autotune is not None and autotune.unavailable_reason is None
        return cls(tuple(stages), autotuned, knob_prefetch, read)

    @property
    def cache_index(self) -> int | None:
        """Index of the first `cache()`, else None."""
        return next((s.index for s in self.stages if s.kind is StageKind.CACHE), None)

    def cached_after(self, stage: StageStat) -> bool:
        """A `cache()` sits after `stage`: from the second epoch on, `stage` does not run."""
        cache = self.cache_index
        return cache is not None and stage.index < cache

    def on_batches(self, stage: StageStat) -> bool:
        """`stage` already runs on whole batches (it comes after a batch)."""
        return stage.unit is StageUnit.BATCH

    def reads_files(self) -> bool:
        """The pipeline reads files or interleaves inputs (shuffling file names is possible)."""
        return any(s.kind in (StageKind.READ, StageKind.INTERLEAVE) for s in self.stages)

    def has_prefetch(self) -> bool | None:
        """The pipeline prefetches: a prefetch stage, or a `prefetch` knob above 0; None where
        neither tells (no stage analysis ran, and the pipeline has no such knob)."""
        if any(s.kind is StageKind.PREFETCH for s in self.stages):
            return True
        if self.knob_prefetch is not None:
            return self.knob_prefetch != 0
        return False if self.stages else None

    def threads(self, stage: StageStat) -> int | None:
        """Threads `stage` ran on: what AUTOTUNE was read to choose, else as written (1 when
        written without parallelism); None when AUTOTUNE's choice for it was not read."""
        if stage.index in self.autotuned:
            return self.autotuned[stage.index]
        argument = PARALLEL_ARGUMENT.get(stage.kind)
        written = stage.parameters.get(argument) if argument else None
        if written == 1:
            return 1
        if written is None or written == 0:
            # tf.data may parallelise a map written without parallelism (its
            # map_parallelization): one thread holds only where the read-out was taken and
            # shows no choice for it.
            return 1 if self.autotune_read else None
        return None if written == -1 else int(written)

    def unmeasured(self) -> list[StageStat]:
        """Stages the stage analysis did not measure (its budget ended, or they failed)."""
        return [s for s in self.stages if s.examples_per_sec is None and s.elements_per_sec is None]


def fit_got_arrays(result: ProfileResult) -> bool:
    """`fit` got arrays: the dataset is the one Keras builds from them, not the user's."""
    return result.discovery is not None and result.discovery.fit_gets_arrays


def made_in_a_library(result: ProfileResult, stage: StageStat) -> bool:
    """No call in the user's code made `stage`: its call is one tfperf records wherever the
    user's code makes it (a method of `TUNABLE`), yet the call-site discovery, which found
    other calls, found none of it, so a library function the user called made it. False
    where no discovery ran or it found nothing (a file that reads its knobs)."""
    discovery = result.discovery
    if discovery is None or not (discovery.sites or discovery.untunable):
        return False
    if stage.method not in {tunable for tunable, _ in TUNABLE}:
        return False
    written = {site.method for site in discovery.sites if site.calls}
    written |= {item.method for item in discovery.untunable}
    return stage.method not in written
