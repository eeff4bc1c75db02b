"""Whether a structure edit may be proposed at a map: each check says why not, or None.

- `cache_problem`: a `cache()` after the map keeps the first pass's elements for every later
  pass. It is refused when a stage at or before the map is not deterministic (a `shuffle`, a
  function drawing random numbers: the cache would freeze one draw), when the pipeline
  already caches there, when the map's cardinality is infinite or unknown (a `repeat` or a
  `filter` before it: the cache would never be complete), and when the cached bytes
  (cardinality x element bytes, from the element spec or measured on a few elements) exceed
  the RAM budget (`tfperf.hardware.default_ram_budget`).
- `decode_problem`: a shuffle moved before the map buffers the map's input instead of its
  output; it is proposed only when the map enlarges elements (a decode), so the buffer's RAM
  falls by that ratio.
- `batched_problem`: the map moved after the batch must trace on the batched element spec and
  give what the batch of its results gave (same structure, dtypes, shapes).

A function calling Python (`numpy_function`) is opaque: randomness in it is not seen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tfperf.frameworks.tensorflow import _tf
from tfperf.hardware import default_ram_budget, detect_machine

if TYPE_CHECKING:
    from tfperf.frameworks.tensorflow._edits import UserCall


MIB = 2**20


def ram_budget() -> int:
    """The RAM a cache may take: tfperf's default budget on this machine."""
    return default_ram_budget(detect_machine())


def cache_problem(dataset: Any) -> str | None:
    """Why `.cache()` after the stage `dataset` is refused, else None."""
    for stage in _tf.walk_inputs(dataset):
        name = _tf.method_of(stage).name
        if name == "shuffle":
            return "a shuffle runs at or before it: a cache would freeze one order"
        if name == "cache":
            return "the pipeline already caches at or before it"
        drawn = _tf.random_ops(stage)
        if drawn:
            return (
                f"the {name} at or before it draws random numbers ({', '.join(drawn)}): a "
                "cache would freeze one draw"
            )
    count = _tf.cardinality(dataset)
    if count is None:
        return (
            "its cardinality is infinite or unknown (a repeat, filter or generator before it): "
            "a cache would never complete"
        )
    size = _tf.element_bytes(dataset)
    if size is None:
        return "the size of its elements cannot be estimated (reading one failed)"
    budget = ram_budget()
    total = count * size
    if total > budget:
        return (
            f"caching {count} elements of {size / MIB:.3g} MiB takes {total / MIB:.4g} MiB, "
            f"more than the RAM budget ({budget / MIB:.4g} MiB)"
        )
    return None


def decode_problem(below: UserCall, shuffle: UserCall) -> str | None:
    """Why the shuffle reading the map `below` is not moved before it, else None."""
    before = _tf.element_bytes(below.args[0])
    after = _tf.element_bytes(below.result)
    if before is None or after is None:
        return "the size of the map's elements cannot be estimated (reading one failed)"
    if after <= before:
        return (
            f"the map does not enlarge its elements ({before:.0f} B -> {after:.0f} B): the "
            "shuffle buffer would not shrink"
        )
    return None


def batched_problem(below: UserCall, batch: UserCall) -> str | None:
    """Why the map `below` is not moved after the batch reading it, else None: its function
    is traced on the batched element spec, and must give the batch of its results."""
    try:
        moved = below.again(batch.again(below.args[0]))
    except Exception as error:  # the function does not take a batch: the answer is no
        message = _tf.short_tf_message(error).splitlines()[0][:160]
        return f"its function does not trace on a batch ({message})"
    if not _tf.same_structure(moved, batch.result):
        return (
            f"on a batch its function gives {_shown(moved)}, not the batch of its results "
            f"({_shown(batch.result)})"
        )
    return None


def _shown(dataset: Any) -> str:
    try:
        return _tf.describe_structure(dataset.element_spec)
    except ValueError:  # a shape of unknown rank
        return str(dataset.element_spec)
