"""A second framework for the contract test: plain Python lists, shaped like a DataLoader.

It has what the PyTorch DataLoader brings that tf.data does not: its workers are processes, it
has no stage graph (`stages` is None) and no call-site patching (`sites` is None). It reuses the
neutral parts of tfperf (the pipeline-file loader, the step timing loop), so it passing the
contract shows a framework of that shape plugs in as an implementation, with no conditional in
the core.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from tfperf.frameworks import (
    CallSites,
    DeviceLayout,
    Framework,
    Input,
    Pipeline,
    ProfileRequest,
    StageNode,
    StrategyKind,
    Words,
    Workers,
)
from tfperf.knobs import Knobs
from tfperf.measure import Measurement, drive
from tfperf.pipeline import PipelineFile, load_pipeline
from tfperf.results import ProfileResult, TrainingRate

#: The comment that marks a file as written for this framework.
MARKER = "# framework: fake-python"


@dataclasses.dataclass(frozen=True)
class Batches:
    """The fake's native input: batches, and the options set on it."""

    batches: list[Any]
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.batches)


class FakePython(Framework):
    name: ClassVar[str] = "fake-python"
    words: ClassVar[Words] = Words(
        name="fake",
        pipeline="Python",
        sites_found_while="file loaded",
        oom_error="MemoryError",
        oom_marks=("MemoryError",),
        label="fake Python",
        script_stop="its first pass",
        first_work="element",
    )
    workers: ClassVar[Workers] = Workers.PROCESSES
    hook: ClassVar[str] = "Batches.__iter__"

    def claims(self, source: str) -> bool:
        return MARKER in source.splitlines()

    def start(self, layout: DeviceLayout | None = None, *, owns_process: bool = False) -> None:
        pass

    def load(
        self, path: str | Path, argv: Sequence[str] = (), *, needs_step: bool = True
    ) -> PipelineFile:
        return load_pipeline(path, argv, needs_step=needs_step)

    def build(
        self, pipeline: Pipeline, knobs: Knobs, *, strategy: StrategyKind | None = None
    ) -> Input:
        assert isinstance(pipeline, PipelineFile) and pipeline.make_train_step is not None
        native = self.apply_options(Batches(list(pipeline.make_dataset(knobs))), knobs)
        return Input(
            batches=lambda: iter(native),
            step=pipeline.make_train_step(knobs),
            sync=lambda outputs: None,
            element=f"list[{len(native.batches[0])}]",
            epoch_steps=len(native.batches),
            options=self.read_options(native),
            native=native,
        )

    def stages(self, built: Input) -> list[StageNode] | None:
        return None

    def apply_options(self, native: Any, knobs: Knobs) -> Batches:
        return Batches(native.batches, {"deterministic": knobs.deterministic})

    def read_options(self, native: Any) -> dict[str, Any]:
        return dict(native.options)

    def profile(
        self, pipeline: Pipeline, knobs: Knobs | None = None, request: ProfileRequest | None = None
    ) -> ProfileResult:
        assert isinstance(pipeline, PipelineFile)
        return drive(Measurement(self, pipeline, knobs, request))  # what `build` made, as it is

    def probe_training(
        self, pipeline: Pipeline, knobs: Knobs, settings: Sequence[Mapping[str, Any]]
    ) -> list[TrainingRate]:
        return []

    def sites(self) -> CallSites | None:
        return None


FRAMEWORK = FakePython()
