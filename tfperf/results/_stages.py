"""The stage analysis of a profile: each stage's rate and cost, and which one limits.

Also AUTOTUNE's choices, the batch shapes the steps met and the options the dataset carried.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from enum import Enum
from typing import Any


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
class Stage:
    """One stage as a framework finds it in the pipeline: where it sits and how it is called.

    Attributes:
        index: position in the pipeline, 0 for the source, in the order the data flows.
        kind: what the stage does (for advice and grouping).
        label: how the stage reads in code, e.g. `map(parse_jpeg)` or `TFRecordDataset`.
        location: `file:line` where the stage's function is defined, if it has one.
        parameters: its tf.data arguments, e.g. `{"num_parallel_calls": -1}` (-1 = AUTOTUNE).
        unit: what one element of this stage is.
    """

    index: int
    kind: StageKind
    label: str
    location: str | None
    parameters: dict[str, int | bool]
    unit: StageUnit

    @property
    def method(self) -> str:
        """The method its label names: `map(parse)` -> `map`."""
        return method_named(self.label)


def method_named(text: str) -> str:
    """The method a call's text names: `map(parse)` or `map(num_parallel_calls=...)` -> `map`."""
    return text.split("(", 1)[0].strip()


@dataclasses.dataclass
class StageStat(Stage):
    """One stage of the pipeline, measured by running the pipeline cut right after it.

    Rates and CPU costs are those of the whole pipeline up to and including this stage (what the
    cut pipeline delivers); `added_s_per_example` and `added_cpu_s_per_example` are what this
    stage adds to the stage before it that counts examples. A field is `None` where it does not
    apply (examples of an `input` stage) or the stage could not be measured (`note` says why).

    Attributes (after the `Stage` it is):
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
        draws_random: the random ops its own function draws anew at each call (a stateful
            op, or a stateless one whose seed a variable advances), e.g.
            `("StatelessRandomUniformV2",)`; empty for a stage that draws none.
    """

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
    draws_random: tuple[str, ...] = ()


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


#: The knobs `DatasetOptions` keeps as fields of their own: all but autotune and `others`.
_OPTION_FIELDS = frozenset(field.name for field in dataclasses.fields(DatasetOptions)) - {
    "autotune",
    "others",
}
