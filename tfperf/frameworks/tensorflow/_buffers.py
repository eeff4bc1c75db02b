"""What each buffering stage of a built `tf.data.Dataset` holds, read from its stage graph.

For every stage that holds elements (`shuffle`, `prefetch`, an in-memory `cache`, a parallel
`interleave`'s cycle, a parallel `map`'s elements in flight, `padded_batch`), the number held
comes from the call's arguments (AUTOTUNE from what the autotuner settled on, when read) and
the bytes of one element from the element spec, or from the first few elements where shapes
vary or elements are strings. The accounting and the advice are neutral
(`tfperf.measure.memory_account`); only the reading is here.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from tfperf.frameworks import StageNode
from tfperf.frameworks.tensorflow import _tf
from tfperf.results.stages import (
    AutotuneReadout,
    BufferHold,
    BufferKind,
    SizeSource,
    StageKind,
    StageUnit,
)

logger = logging.getLogger(__name__)

#: A map whose elements are at least this many times the bytes of its input's enlarges them
#: (a decode): a buffer above it could hold the smaller input instead.
ENLARGES_AT = 2.0

#: Stages that pass their input's elements through unchanged: an element's bytes are measured
#: below them, so measuring never waits for a buffer to fill.
_PASS_THROUGH = frozenset(
    {StageKind.SHUFFLE, StageKind.PREFETCH, StageKind.CACHE, StageKind.REPEAT, StageKind.TAKE}
    | {StageKind.SKIP, StageKind.SHARD}
)

_INTEGER_DTYPES = frozenset({"uint8", "int8", "uint16", "int16"})
_FLOAT_DTYPES = frozenset({"float16", "bfloat16", "float32", "float64"})


def buffer_holds(
    stages: Sequence[StageNode], autotune: AutotuneReadout | None, cpu_count: int
) -> list[BufferHold]:
    """One `BufferHold` per buffering stage of `stages` (source first) whose size is known.

    Args:
        stages: the recovered chain (`_chain.recover_stages`).
        autotune: the values AUTOTUNE settled on; None: an AUTOTUNE size counts as described
            in `_autotuned`.
        cpu_count: what an unread AUTOTUNE parallelism counts as (tf.data's ceiling).
    """
    holds = []
    for stage in stages:
        try:
            hold = _hold(stage, autotune, cpu_count)
        except Exception:  # one unreadable stage must not cost the profile its account
            logger.info("could not size the buffer of %s", stage.label, exc_info=True)
            continue
        if hold is not None:
            holds.append(hold)
    return holds


def _hold(stage: StageNode, autotune: AutotuneReadout | None, cpu_count: int) -> BufferHold | None:
    counted = _elements(stage, autotune, cpu_count)
    if counted is None:
        return None
    kind, elements, note = counted
    size = _element_size(stage.dataset)
    if size is None:
        return None
    per_element, source = size
    enlarged_by, before = _enlarging_map(stage.dataset) if kind in _MOVABLE else (None, None)
    return BufferHold(
        stage=stage.label,
        kind=kind,
        location=stage.location,
        elements=elements,
        bytes_per_element=per_element,
        size_source=source,
        note=note,
        enlarged_by=enlarged_by,
        bytes_before=before,
        cast_by=_casting_map(stage.dataset),
        batched=stage.unit is StageUnit.BATCH,
    )


#: Buffers that could sit below the map that enlarges their elements.
_MOVABLE = frozenset({BufferKind.SHUFFLE, BufferKind.CACHE})


def _elements(
    stage: StageNode, autotune: AutotuneReadout | None, cpu_count: int
) -> tuple[BufferKind, int, str | None] | None:
    """The buffer kind, how many elements it holds at most, and how that was counted."""
    parameters = stage.parameters
    if stage.kind is StageKind.SHUFFLE:
        size = _int(parameters.get("buffer_size"))
        inputs = _tf.inputs(stage.dataset)
        epoch = _tf.cardinality(inputs[0]) if len(inputs) == 1 else None
        if epoch is not None and epoch < size:  # a pass shorter than the buffer fills it
            return BufferKind.SHUFFLE, epoch, BufferHold.pass_note(epoch)
        return BufferKind.SHUFFLE, size, None
    if stage.kind is StageKind.PREFETCH:
        size, note = _autotuned(stage, "buffer_size", autotune, 1)
        return BufferKind.PREFETCH, size, note
    if stage.kind is StageKind.CACHE:
        if _tf.cache_file(stage.dataset) != "":
            return None  # cached to a file: it holds no host memory
        count = _tf.cardinality(stage.dataset)
        if count is None:
            return None
        return BufferKind.CACHE, count, "one full pass, once cached"
    if stage.kind is StageKind.MAP and _parallel(parameters.get("num_parallel_calls")):
        size, note = _autotuned(stage, "num_parallel_calls", autotune, cpu_count)
        return BufferKind.PARALLEL_MAP, size, note
    if stage.kind is StageKind.INTERLEAVE and _parallel(parameters.get("num_parallel_calls")):
        size, note = _autotuned(stage, "cycle_length", autotune, cpu_count)
        return BufferKind.INTERLEAVE, size, note
    if _tf.method_of(stage.dataset).name == "padded_batch":
        return BufferKind.PADDED_BATCH, 1, None
    return None


def _autotuned(
    stage: StageNode, argument: str, autotune: AutotuneReadout | None, fallback: int
) -> tuple[int, str | None]:
    """An argument's value; for AUTOTUNE (-1) what the autotuner chose, else `fallback`."""
    value = _int(stage.parameters.get(argument))
    if value >= 0:
        return value, None
    chosen = [
        choice.value
        for choice in (autotune.choices if autotune is not None else [])
        if choice.stage_index == stage.index and choice.argument == argument
    ]
    if chosen:
        return max(chosen), f"AUTOTUNE settled on {max(chosen)}"
    return fallback, f"AUTOTUNE, counted as {fallback} (its choice was not read)"


def _int(value: int | bool | None) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _parallel(value: int | bool | None) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and (value > 1 or value == -1)


def _element_size(dataset: Any) -> tuple[float, SizeSource] | None:
    """Bytes of one element: from the spec, else measured below any pass-through stages."""
    exact = _tf.spec_bytes(dataset)
    if exact is not None:
        return float(exact), SizeSource.SPEC
    measured = _tf.element_bytes(_below_pass_through(dataset))
    return (measured, SizeSource.MEASURED) if measured is not None else None


def _below_pass_through(dataset: Any) -> Any:
    """The nearest dataset at or below `dataset` whose elements it passes on unchanged, and
    that is no buffer (reading one element of it fills nothing)."""
    current = dataset
    while _tf.method_of(current).stage in _PASS_THROUGH:
        inputs = _tf.inputs(current)
        if len(inputs) != 1:
            return current
        current = inputs[0]
    return current


def _maps_below(
    dataset: Any, *, across_batches: bool = False, across_cache: bool = True
) -> list[Any]:
    """The user's maps below `dataset` whose elements reach it one to one (no batch, unbatch,
    interleave or join between them; with `across_batches`, batches do not stop the walk;
    without `across_cache`, a cache() does: a stage moved across it changes what it stores)."""
    passing = _PASS_THROUGH | {StageKind.FILTER}
    if across_batches:
        passing |= {StageKind.BATCH}
    if not across_cache:
        passing -= {StageKind.CACHE}
    found, current = [], dataset
    while True:
        inputs = _tf.inputs(current)
        method = _tf.method_of(current)
        if method.stage is StageKind.MAP and _tf.user_function(current) is not None:
            found.append(current)
        elif method.stage not in passing and current is not dataset:
            return found
        if len(inputs) != 1:
            return found
        current = inputs[0]


def _enlarging_map(dataset: Any) -> tuple[str | None, float | None]:
    """The map below `dataset` that enlarges elements the most (label, bytes of its input)."""
    best: tuple[float, str, float] | None = None
    # A shuffle moved before a decode across cache() would be cached with the first epoch's
    # order, so every later epoch would repeat it: the walk stops at a cache.
    for found in _maps_below(dataset, across_cache=False):
        after = _tf.element_bytes(found)
        before = _tf.element_bytes(_below_pass_through(_tf.inputs(found)[0]))
        if not after or not before or after < ENLARGES_AT * before:
            continue
        if best is None or after / before > best[0]:
            best = (after / before, _label(found), before)
    return (best[1], best[2]) if best is not None else (None, None)


def _casting_map(dataset: Any) -> str | None:
    """A map below `dataset` that turns small integers (pixels) into floats, else None."""
    for found in _maps_below(dataset, across_batches=True):
        before = _dtypes(_tf.inputs(found)[0])
        after = _dtypes(found)
        # The cast itself, read in the map's graph: floats that augmentation makes from
        # integers are no cast to move, and labels left integer do not hide one.
        if before & _INTEGER_DTYPES and after & _FLOAT_DTYPES and _tf.casts_to_float(found):
            return _label(found)
    return None


def _dtypes(dataset: Any) -> set[str]:
    import tensorflow as tf

    leaves = tf.nest.flatten(dataset.element_spec)
    return {leaf.dtype.name for leaf in leaves if hasattr(leaf, "dtype")}


def _label(dataset: Any) -> str:
    from tfperf.frameworks.tensorflow._chain import describe

    return describe(dataset)[1]
