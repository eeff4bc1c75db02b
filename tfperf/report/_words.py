"""How knob values read to a person in a report: an unset knob says what tf.data does instead."""

from __future__ import annotations

from typing import Any

from tfperf.knobs import format_value

#: What tf.data does with a knob left unset, by knob: "None" means nothing to a reader.
_UNSET = {
    "num_parallel_calls": "sequential",
    "num_parallel_reads": "sequential",
    "cycle_length": "the number of CPU cores",
    "prefetch": "no prefetch of its own",
    "shuffle_buffer": "no shuffle",
    "mixed_precision": "float32",
    "deterministic": "deterministic",
    "private_threadpool_size": "the shared thread pool",
}


def knob_value(value: Any, name: str = "") -> str:
    """A knob's value as a person reads it; an unset one says what tf.data does instead."""
    if value is None:
        default = _UNSET.get(name)
        return f"not set (tf.data's default: {default})" if default else "not set"
    return format_value(value)
