"""Ready-to-paste code for a recommended configuration: a BASELINE dict and tf.data calls.

Every line comes from a knob's declaration (`tfperf.knobs.KNOBS`): its `snippet`, or, for a
tf.data option, its option path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tfperf import frameworks
from tfperf.knobs import AUTOTUNE, KNOBS, Precision, framework_knobs
from tfperf.knobs.declare import Applier, Knob


def baseline_snippet(knobs: Mapping[str, Any], framework: str = frameworks.DEFAULT) -> str:
    """`BASELINE = {...}` with every knob of `framework`, one per line, in declaration order."""
    names = framework_knobs(framework)
    lines = [f"    {name!r}: {_python(knobs[name])}," for name in names if name in knobs]
    return "BASELINE = {\n" + "\n".join(lines) + "\n}"


def code_snippet(knobs: Mapping[str, Any], framework: str = frameworks.DEFAULT) -> str:
    """The calls that carry these knobs in `framework`'s code: the DataLoader's arguments
    where the framework has DataLoader knobs, else tf.data's calls (`tf_data_snippet`)."""
    loader = [k for k in KNOBS.applied_by(Applier.DATALOADER) if framework in k.frameworks]
    return dataloader_snippet(knobs, loader) if loader else tf_data_snippet(knobs)


def dataloader_snippet(knobs: Mapping[str, Any], declared: list[Knob]) -> str:
    """`DataLoader(dataset, ...)` with the batch size and every DataLoader argument set, then
    the trainer's settings (threads, autocast)."""
    arguments = [f"batch_size={knobs.get(KNOBS.batch_size.name, KNOBS.batch_size.default)}"]
    arguments += [
        f"{knob.option}={knobs[knob.name]!r}"
        for knob in declared
        if knobs.get(knob.name) is not None
    ]
    lines = [f"loader = DataLoader(dataset, {', '.join(arguments)})"]
    trainer = [k for k in KNOBS.applied_by(Applier.TRAINER) if k.snippet is not None]
    lines += _lines(trainer, knobs)
    precision = knobs.get(KNOBS.mixed_precision.name, Precision.FLOAT32.value)
    if precision != Precision.FLOAT32.value:
        dtype = str(precision).removeprefix("mixed_")
        lines.append(f"with torch.autocast(device, dtype=torch.{dtype}):  # around the step")
    return "\n".join(lines)


def tf_data_snippet(knobs: Mapping[str, Any]) -> str:
    """The tf.data and Keras calls that carry these knobs, for code that does not read `knobs`.

    The calls of the pipeline in their usual order, then the tf.data options tfperf applied,
    then the other settings (precision policy, GPU memory growth) in declaration order. A knob
    missing from `knobs` takes its declared default.
    """
    steps = sorted((knob for knob in KNOBS if _step(knob)), key=_step)
    settings = [knob for knob in KNOBS if knob.snippet is not None and knob not in steps]
    return "\n".join(
        [
            *_lines(steps, knobs),
            *_options_lines(knobs),
            *_lines(settings, knobs),
        ]
    )


def _step(knob: Knob) -> int:
    """Where the call carrying `knob` sits in a pipeline (`Step`); 0 for a setting outside it."""
    return knob.snippet.step or 0 if knob.snippet is not None else 0


def _lines(declared: list[Knob], knobs: Mapping[str, Any]) -> list[str]:
    lines = []
    for knob in declared:
        value = knobs.get(knob.name, knob.default)
        if knob.snippet is not None and value not in knob.snippet.unless:
            lines.append(knob.snippet.template.format(value=_tf(value)))
    return lines


def _options_lines(knobs: Mapping[str, Any]) -> list[str]:
    settings = [
        knob.option_snippet(knobs[knob.name])
        for knob in KNOBS.applied_by(Applier.TF_DATA)
        if knobs.get(knob.name) is not None
    ]
    if not settings:
        return []
    return ["options = tf.data.Options()", *settings, "ds = ds.with_options(options)"]


def _tf(value: Any) -> str:
    return "tf.data.AUTOTUNE" if value == AUTOTUNE else str(value)


def _python(value: Any) -> str:
    return '"AUTOTUNE"' if value == AUTOTUNE and isinstance(value, int) else repr(value)
