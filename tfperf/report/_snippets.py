"""Ready-to-paste code for a recommended configuration: a BASELINE dict and tf.data calls."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tfperf.knobs import AUTOTUNE, Knobs


def baseline_snippet(knobs: Mapping[str, Any]) -> str:
    """`BASELINE = {...}` with every knob, one per line, in declaration order."""
    lines = [f"    {name!r}: {_python(knobs[name])}," for name in Knobs.names() if name in knobs]
    return "BASELINE = {\n" + "\n".join(lines) + "\n}"


def tf_data_snippet(knobs: Mapping[str, Any]) -> str:
    """The tf.data and Keras calls that carry these knobs, for code that does not read `knobs`."""
    reads = _tf(knobs["num_parallel_reads"])
    lines = [
        f"ds = tf.data.TFRecordDataset(files, num_parallel_reads={reads})",
        # tf.data refuses interleave parallelism above a fixed cycle_length: keep them equal.
        f"ds = files.interleave(read, cycle_length={_tf(knobs['cycle_length'])}, "
        f"num_parallel_calls={_tf(knobs['cycle_length'])})  # if you interleave",
        f"ds = ds.shuffle({knobs['shuffle_buffer']})",
        f"ds = ds.map(parse, num_parallel_calls={_tf(knobs['num_parallel_calls'])})",
        f"ds = ds.batch({knobs['batch_size']})",
    ]
    if knobs["prefetch"] != 0:
        lines.append(f"ds = ds.prefetch({_tf(knobs['prefetch'])})")
    lines.extend(_options_lines(knobs))
    if knobs["mixed_precision"] != "float32":
        lines.append(f'keras.mixed_precision.set_global_policy("{knobs["mixed_precision"]}")')
    if knobs.get("gpu_memory_growth") is not None:
        lines.append(growth_line(knobs["gpu_memory_growth"]))
    return "\n".join(lines)


def growth_line(growth: bool) -> str:
    """The call that sets GPU memory growth as a trial measured it (before the GPU starts)."""
    return (
        'for gpu in tf.config.list_physical_devices("GPU"):  # before TensorFlow uses the GPU\n'
        f"    tf.config.experimental.set_memory_growth(gpu, {growth})"
    )


def _options_lines(knobs: Mapping[str, Any]) -> list[str]:
    settings = []
    if knobs.get("deterministic") is not None:
        settings.append(f"options.deterministic = {knobs['deterministic']}")
    if knobs.get("private_threadpool_size") is not None:
        settings.append(
            f"options.threading.private_threadpool_size = {knobs['private_threadpool_size']}"
        )
    if not settings:
        return []
    return ["options = tf.data.Options()", *settings, "ds = ds.with_options(options)"]


def _tf(value: Any) -> str:
    return "tf.data.AUTOTUNE" if value == AUTOTUNE else str(value)


def _python(value: Any) -> str:
    return '"AUTOTUNE"' if value == AUTOTUNE and isinstance(value, int) else repr(value)
