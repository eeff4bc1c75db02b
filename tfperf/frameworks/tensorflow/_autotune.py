"""What AUTOTUNE chose: the values tf.data's autotuner settled on, read from a live iterator.

tf.data keeps, inside every iterator with autotuning on, a model of the pipeline whose nodes
hold the tuned parameters (`parallelism`, `buffer_size`, ...); `_tf.autotune_nodes` reads
it, with both the optimizer's current guess (`value`) and the value the running iterator uses
(`state_value`). tfperf reports the latter. See docs/autotune.md.

`IteratorRecorder` stands in for the dataset during a profile: it hands the profiler real
iterators and, when the end-to-end phase's last measured step is reported, reads the model of
the iterator in use. The model's nodes are then matched to the stages of
`_chain` through the table of tf.data calls (`_tf.METHODS`: which
nodes stand for which call, which parameter for which argument), so each value is reported
against the call the user wrote.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from tfperf.frameworks.tensorflow import _tf
from tfperf.frameworks.tensorflow._tf import AutotuneNode, AutotuneParameter
from tfperf.measure import Progress, ProgressCallback
from tfperf.results import Phase
from tfperf.results.stages import AutotuneChoice, AutotuneReadout, StageKind

logger = logging.getLogger(__name__)


class StageRef(Protocol):
    """What matching needs to know about a stage; a `StageNode` or a `StageStat` will do."""

    @property
    def index(self) -> int: ...

    @property
    def kind(self) -> StageKind: ...

    @property
    def label(self) -> str: ...

    @property
    def parameters(self) -> dict[str, int | bool]: ...


class IteratorRecorder:
    """Passes for the dataset in `profile()`, and reads AUTOTUNE's choices at the right moment.

    It keeps the iterator it handed out last only during the end-to-end phase, and reads that
    iterator's model when the phase's last measured step is reported through `progress`.
    """

    def __init__(self, dataset: Any, stages: Sequence[StageRef]) -> None:
        self.dataset = dataset
        self.stages = list(stages)
        self.readout: AutotuneReadout | None = None
        self._current: Any = None
        self._recording = True

    def __iter__(self) -> Iterator[Any]:
        iterator: Iterator[Any] = iter(self.dataset)
        if self._recording:
            self._current = iterator
        return iterator

    def progress(self, forward: ProgressCallback | None) -> ProgressCallback:
        """A progress callback that reads the model at the end of the end-to-end phase."""

        def report(progress: Progress) -> None:
            if self._recording and _last_end_to_end_step(progress):
                self.readout = read_choices(self._current, self.stages)
                self._current, self._recording = None, False
            if forward is not None:
                forward(progress)

        return report


def _last_end_to_end_step(progress: Progress) -> bool:
    return progress.phase is Phase.END_TO_END and progress.complete


def read_choices(iterator: Any, stages: Sequence[StageRef]) -> AutotuneReadout:
    """AUTOTUNE's choices in a live tf.data iterator, matched to `stages`.

    Returns an empty readout with the reason when the model cannot be read; never raises.
    """
    if iterator is None:
        return AutotuneReadout([], "no iterator was live at the end of the end-to-end phase")
    if "Distributed" in type(iterator).__name__:
        return AutotuneReadout(
            [],
            "the dataset was read through a tf.distribute iterator (one per replica), whose "
            "tf.data model TensorFlow does not expose, so AUTOTUNE's choices cannot be read; "
            "profile without a strategy (--strategy default) to see them",
        )
    try:
        nodes = _tf.autotune_nodes(iterator)
    except Exception as error:  # an unreadable model must not cost the profile
        return AutotuneReadout([], _unavailable(error))
    return AutotuneReadout(match_choices(nodes, stages))


def match_choices(
    nodes: Sequence[AutotuneNode], stages: Sequence[StageRef]
) -> list[AutotuneChoice]:
    """The tuned values of `nodes` (output first), source first, each attributed to its stage.

    Nodes and stages are matched in order, from the output, by kind: a node no stage claims
    was added by tf.data (an injected prefetch). A `MapAndBatch` node (tf.data fused the map
    with the batch after it) is attributed to the map, whose parallelism it holds.
    """
    claimed: dict[int, StageRef] = {}
    position = 0
    for stage in sorted(stages, key=lambda ref: ref.index, reverse=True):
        for offset, node in enumerate(nodes[position:]):
            if stage.kind in _tf.node_kinds(node.name):
                fused_with_map = _tf.fused_map_and_batch(node.name)
                if not (fused_with_map and stage.kind is StageKind.BATCH):
                    claimed[position + offset] = stage
                    position += offset + 1
                break
    choices = []
    # Reported in data-flow order, source first, like the stages.
    for number in reversed(range(len(nodes))):
        choices.extend(_choices_of(nodes[number], claimed.get(number)))
    return choices


def _choices_of(node: AutotuneNode, stage: StageRef | None) -> list[AutotuneChoice]:
    choices = []
    for parameter in node.parameters:
        if not (parameter.tunable or _resolved_from_autotune(parameter, stage)):
            continue
        kind = stage.kind if stage is not None else None
        value = parameter.state_value if parameter.tunable else parameter.value
        choices.append(
            AutotuneChoice(
                stage_index=stage.index if stage is not None else None,
                stage_label=stage.label if stage is not None else f"{node.name} (added by tf.data)",
                node=node.name,
                parameter=parameter.name,
                argument=_tf.autotune_argument(kind, parameter.name) if kind is not None else None,
                value=int(value),
                tuned=parameter.tunable,
            )
        )
    return choices


def _resolved_from_autotune(parameter: AutotuneParameter, stage: StageRef | None) -> bool:
    """True for a value tf.data fixed once from an AUTOTUNE argument (cycle_length)."""
    if stage is None:
        return False
    arguments = _tf.resolved_arguments(parameter.name)
    return any(stage.parameters.get(name) == -1 for name in arguments)


def _unavailable(error: Exception) -> str:
    if isinstance(error, AttributeError):
        return (
            "this TensorFlow has no tf.data.experimental.get_model_proto (documented from "
            "TensorFlow 2.17 on), so the values AUTOTUNE chose cannot be read; upgrade "
            "TensorFlow to see them"
        )
    if type(error).__name__ == "NotFoundError":
        return (
            "tf.data autotuning is off for this dataset (options.autotune.enabled=False), so "
            "its iterator keeps no model to read AUTOTUNE's choices from"
        )
    return f"tf.data's model could not be read: {type(error).__name__}: {error}"
