"""Where a pipeline moves to tf.data service workers, and whether the service can run it.

The cut is the pipeline without its trailing `prefetch` stages: after `batch` in the usual
`... -> batch -> prefetch` pipeline. Everything above the cut runs on the workers; the trainer
keeps a local `prefetch` after `distribute()`, so reading overlaps the step as before.

A worker runs the dataset's graph in another process, without the trainer's Python: a stage
whose function calls Python (`tf.py_function`, `tf.numpy_function`) or whose source is a Python
generator (`from_generator`) cannot run there. Nor can a stage that captures a resource living
in this process that TensorFlow cannot rebuild from the graph (an iterator, a queue): the
worker fails at its first element. Variables and lookup tables are rebuilt on the worker (from
their values when `distribute()` is applied), so they run there and are not refused.
`check_runs_on_service` names the first stage the service cannot run, its line and the fix,
before anything is measured.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tfperf.errors import PipelineFileError
from tfperf.frameworks import StageNode
from tfperf.frameworks.tensorflow import _tf
from tfperf.frameworks.tensorflow._chain import recover_chain
from tfperf.results.stages import StageKind


@dataclasses.dataclass(frozen=True)
class Cut:
    """The dataset cut for the workers, and the label of its last stage."""

    dataset: Any
    label: str


def cut_dataset(dataset: Any) -> Cut:
    """`dataset` without its trailing prefetch stages (the dataset itself if none)."""
    stages = recover_chain(dataset).stages
    kept = list(stages)
    while len(kept) > 1 and kept[-1].kind is StageKind.PREFETCH:
        kept.pop()
    if not kept:
        return Cut(dataset, "the pipeline's output")
    return Cut(kept[-1].dataset, kept[-1].label)


def check_runs_on_service(dataset: Any, file_name: str) -> None:
    """Raises if a stage of `dataset` cannot run on a tf.data service worker.

    Raises:
        PipelineFileError: names the stage, where it is written and the fix.
    """
    stages = recover_chain(dataset).stages
    for stage in stages:
        problem = _problem(stage)
        if problem is not None:
            raise PipelineFileError(
                f"{file_name}: the stage {_named(stage)} {problem} A tf.data service worker "
                "runs the dataset's graph in its own process, without this process's Python, "
                "so it cannot run this stage. "
                + (_GENERATOR_FIX if _is_generator(stage) else _PYTHON_FIX)
            )
    whole = _tf.process_resources(dataset) if stages else []  # one serialisation when none
    if not whole:
        return
    for stage in stages:  # source first: the first stage whose cut holds such a handle
        resources = _tf.process_resources(stage.dataset)
        if resources:
            break
    else:  # not found stage by stage: the whole pipeline holds it
        stage, resources = stages[-1], whole
    raise PipelineFileError(
        f"{file_name}: the stage {_named(stage)} uses a {resources[0]} created in this "
        "process. A tf.data service worker rebuilds the dataset from its graph in its own "
        f"process, where this resource does not exist, so it cannot run this stage. {_RESOURCE_FIX}"
    )


def _named(stage: StageNode) -> str:
    return f"{stage.label} at {stage.location}" if stage.location else stage.label


_PYTHON_FIX = (
    "Write the function with TensorFlow ops (tf.image, tf.strings, tf.io) instead of "
    "tf.py_function / tf.numpy_function, or apply it after `distribute()`, on the trainer."
)
_GENERATOR_FIX = (
    "Read the data with a tf.data source the worker can run (tf.data.TFRecordDataset, "
    "Dataset.from_tensor_slices, Dataset.list_files) instead of Dataset.from_generator."
)


_RESOURCE_FIX = (
    "Read that data with a tf.data stage (Dataset.zip with the dataset the iterator reads, "
    "or interleave) instead of an iterator or queue captured from this process, keep state "
    "in a tf.Variable or a lookup table (which the worker rebuilds), or apply this stage "
    "after `distribute()`, on the trainer."
)


def _is_generator(stage: StageNode) -> bool:
    return stage.label.startswith("from_generator(")


def _problem(stage: StageNode) -> str | None:
    if _is_generator(stage):
        return "reads from a Python generator (Dataset.from_generator)."
    if stage.calls_python:
        return "calls Python for each element (tf.py_function or tf.numpy_function)."
    return None
