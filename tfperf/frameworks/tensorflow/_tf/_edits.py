"""What a structure edit needs to know of a built dataset: its element size, its randomness.

`_edits` proposes a `cache()` only after deterministic stages whose elements fit
in RAM, moves a `shuffle` before a map only when the map enlarges its elements, and moves a
map after `batch` only when its function traces on a batch to the same result structure. The
facts come from here: `element_bytes` (from the element spec, else measured on the first few
elements), `random_ops` (the random ops in a stage's traced functions) and `same_structure`.
`varying_random_ops` keeps those whose draws change from one call to the next, for a finding
on a `cache()` the user wrote after them.
"""

from __future__ import annotations

import re
from typing import Any

from tfperf.frameworks.tensorflow._tf._datasets import FUNCTION_ATTRIBUTES, _graph, _op_types

#: Op types that draw random numbers (stateful or seeded per call): a stage holding one gives
#: other elements on every pass, so caching after it would freeze one draw.
_RANDOM = re.compile(
    r"Random|Multinomial|TruncatedNormal|RngReadAndSkip|RngSkip|StatefulUniform|"
    r"StatefulStandardNormal|NonDeterministicInts|ShuffleDataset"
)
#: Ops that write a variable: a stateless random op in a function that also writes one takes
#: its seed from state that advances from call to call (Keras's random layers do so).
_WRITES_STATE = frozenset({"AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp"})


def spec_bytes(dataset: Any) -> int | None:
    """Bytes of one element from the element spec alone; None when a shape is not fully known
    or a component has no fixed size (a string, a ragged or sparse tensor)."""
    import tensorflow as tf

    total = 0
    for spec in tf.nest.flatten(dataset.element_spec, expand_composites=False):
        if not isinstance(spec, tf.TensorSpec) or not spec.shape.is_fully_defined():
            return None
        if spec.dtype == tf.string or spec.dtype == tf.variant:
            return None
        total += spec.shape.num_elements() * spec.dtype.size
    return total


def element_bytes(dataset: Any, sample: int = 4) -> float | None:
    """Bytes of one element of `dataset`: from its spec, else the mean over its first `sample`
    elements (strings count their length). None when it has none or reading one fails."""
    exact = spec_bytes(dataset)
    if exact is not None:
        return float(exact)
    import tensorflow as tf

    sizes = []
    try:
        for element in dataset.take(sample):
            parts = tf.nest.flatten(element, expand_composites=True)
            sizes.append(sum(_tensor_bytes(part) for part in parts))
    except Exception:  # the user's pipeline fails on its own: no estimate
        return None
    return sum(sizes) / len(sizes) if sizes else None


def _tensor_bytes(tensor: Any) -> int:
    value = tensor.numpy()
    if isinstance(value, bytes):  # a scalar tf.string reads back as bytes, not an array
        return len(value)
    if value.dtype == object:  # tf.string: bytes objects
        return sum(len(item) for item in value.ravel()) if value.ndim else len(value)
    return int(value.nbytes)


def random_ops(dataset: Any) -> list[str]:
    """The random op types in the functions `dataset` itself traced (not its inputs')."""
    found: list[str] = []
    for attribute in FUNCTION_ATTRIBUTES:
        graph = _graph(getattr(dataset, attribute, None))
        if graph is None:
            continue
        for op_type in _op_types(graph):
            if _RANDOM.search(op_type) and op_type not in found:
                found.append(op_type)
    return found


def varying_random_ops(dataset: Any) -> list[str]:
    """The random op types in `dataset`'s own functions whose draws change from call to call:
    every stateful one, and the stateless ones of a function that also writes a variable (a
    seed generator's state). A stateless op seeded from the element alone draws the same on
    every pass, and is left out."""
    found: list[str] = []
    for attribute in FUNCTION_ATTRIBUTES:
        graph = _graph(getattr(dataset, attribute, None))
        if graph is None:
            continue
        types = _op_types(graph)
        advances = not _WRITES_STATE.isdisjoint(types)
        for op_type in types:
            varies = advances or not op_type.startswith("Stateless")
            if _RANDOM.search(op_type) and varies and op_type not in found:
                found.append(op_type)
    return found


def same_structure(first: Any, second: Any) -> bool:
    """Whether two datasets hand out elements of one structure, dtypes and shapes."""
    try:
        return bool(first.element_spec == second.element_spec)
    except Exception:  # an element spec that cannot be compared: not the same
        return False
