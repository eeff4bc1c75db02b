"""Reading the values AUTOTUNE chose: matching tf.data's model to stages, and a live iterator."""

from __future__ import annotations

import dataclasses

import pytest

from tfperf.frameworks.tensorflow._autotune import (
    IteratorRecorder,
    match_choices,
    read_choices,
)
from tfperf.frameworks.tensorflow._tf import AutotuneNode, AutotuneParameter
from tfperf.measure import Progress
from tfperf.results import Phase
from tfperf.results.stages import AutotuneChoice, StageKind


@dataclasses.dataclass
class Stage:
    index: int
    kind: StageKind
    label: str
    parameters: dict[str, int | bool]


def _tuned(name, state_value, value=1.0):
    return AutotuneParameter(name, value=value, state_value=state_value, tunable=True)


def _fixed(name, value):
    return AutotuneParameter(name, value=value, state_value=0.0, tunable=False)


STAGES = [
    Stage(0, StageKind.SOURCE, "from_tensor_slices", {}),
    Stage(1, StageKind.INTERLEAVE, "interleave(TFRecordDataset)", {"cycle_length": -1}),
    Stage(2, StageKind.SHUFFLE, "shuffle(1000)", {"buffer_size": 1000}),
    Stage(3, StageKind.MAP, "map(parse)", {"num_parallel_calls": -1}),
    Stage(4, StageKind.BATCH, "batch(64)", {"batch_size": 64}),
]


def test_a_fused_map_and_batch_is_reported_on_the_map_and_an_injected_prefetch_on_its_own():
    nodes = [
        AutotuneNode("Prefetch", (_tuned("buffer_size", 4.0),)),
        AutotuneNode("MapAndBatch", (_tuned("parallelism", 2.0),)),
        AutotuneNode("Shuffle", ()),
        AutotuneNode(
            "ParallelInterleaveV4",
            (_fixed("deterministic", 1.0), _tuned("parallelism", 1.0), _fixed("cycle_length", 1.0)),
        ),
        AutotuneNode("TensorSlice", ()),
    ]
    assert match_choices(nodes, STAGES) == [
        AutotuneChoice(
            1, "interleave(TFRecordDataset)", "ParallelInterleaveV4", "parallelism",
            "num_parallel_calls", 1, True,
        ),
        AutotuneChoice(
            1, "interleave(TFRecordDataset)", "ParallelInterleaveV4", "cycle_length",
            "cycle_length", 1, False,
        ),
        AutotuneChoice(
            3, "map(parse)", "MapAndBatch", "parallelism", "num_parallel_calls", 2, True
        ),
        AutotuneChoice(
            None, "Prefetch (added by tf.data)", "Prefetch", "buffer_size", None, 4, True
        ),
    ]  # fmt: skip


def test_a_fixed_cycle_length_is_not_reported_and_the_value_in_use_wins():
    stages = [dataclasses.replace(STAGES[1], parameters={"cycle_length": 4})]
    nodes = [
        AutotuneNode(
            "ParallelInterleaveV4",
            # The optimizer's guess (value=3) differs from the value the iterator runs with.
            (_tuned("parallelism", 4.0, value=3.0), _fixed("cycle_length", 4.0)),
        )
    ]
    choices = match_choices(nodes, stages)
    assert [(c.parameter, c.value, c.tuned) for c in choices] == [("parallelism", 4, True)]


def test_reading_without_an_iterator_says_why():
    readout = read_choices(None, STAGES)
    assert readout.choices == []
    assert readout.unavailable_reason == "no iterator was live at the end of the end-to-end phase"


@pytest.mark.tf
def test_a_map_with_autotune_reports_the_parallelism_in_use():
    tf = pytest.importorskip("tensorflow")
    from tfperf.frameworks.tensorflow._chain import recover_chain

    def parse(x):
        return x * 2

    dataset = (
        tf.data.Dataset.range(10_000)
        .map(parse, num_parallel_calls=tf.data.AUTOTUNE)
        .batch(4, num_parallel_calls=2)
        .prefetch(tf.data.AUTOTUNE)
    )
    iterator = iter(dataset)
    for _ in range(50):
        next(iterator)
    readout = read_choices(iterator, recover_chain(dataset).stages)

    assert readout.unavailable_reason is None
    by_stage = {(c.stage_label, c.argument): c for c in readout.choices}
    parallelism = by_stage[("map(parse)", "num_parallel_calls")]
    assert parallelism.stage_index == 1 and parallelism.tuned
    assert parallelism.value >= 1
    assert by_stage[("prefetch(AUTOTUNE)", "buffer_size")].value >= 1
    # The batch's parallelism was fixed at 2, so AUTOTUNE chose nothing there.
    assert ("batch(4)", "num_parallel_calls") not in by_stage


@pytest.mark.tf
def test_autotuning_turned_off_is_reported_not_guessed():
    tf = pytest.importorskip("tensorflow")
    options = tf.data.Options()
    options.autotune.enabled = False
    dataset = tf.data.Dataset.range(100).map(lambda x: x + 1).with_options(options)
    iterator = iter(dataset)
    next(iterator)
    readout = read_choices(iterator, [])
    assert readout.choices == []
    assert readout.unavailable_reason is not None
    assert readout.unavailable_reason.startswith("tf.data autotuning is off for this dataset")


@pytest.mark.tf
def test_the_recorder_reads_the_iterator_of_the_end_to_end_phase_only():
    tf = pytest.importorskip("tensorflow")
    dataset = tf.data.Dataset.range(1000).map(lambda x: x * 2, num_parallel_calls=-1)
    seen: list[Progress] = []
    recorder = IteratorRecorder(dataset, [])
    report = recorder.progress(seen.append)

    iterator = iter(recorder)
    next(iterator)
    report(Progress(Phase.END_TO_END, warming_up=False, measured_steps=1, target_steps=2))
    assert recorder.readout is None  # not the last measured step yet
    report(Progress(Phase.END_TO_END, warming_up=False, measured_steps=2, target_steps=2))
    assert recorder.readout is None  # the target steps, but the window's seconds not yet
    report(
        Progress(
            Phase.END_TO_END, warming_up=False, measured_steps=3, target_steps=2, complete=True
        )
    )
    assert recorder.readout is not None and recorder.readout.unavailable_reason is None
    assert "parallelism" in {c.parameter for c in recorder.readout.choices}
    iter(recorder)  # the pipeline-only phase: not kept
    assert recorder._current is None
    assert len(seen) == 3  # progress is passed on


def test_a_distributed_iterator_gets_a_reason_not_tensorflows_error():
    from tfperf.frameworks.tensorflow._autotune import read_choices

    class DistributedIterator:  # the class tf.distribute hands out, by name
        pass

    readout = read_choices(DistributedIterator(), [])
    assert readout.choices == []
    assert readout.unavailable_reason is not None
    assert "tf.distribute iterator" in readout.unavailable_reason
    assert "--strategy default" in readout.unavailable_reason
