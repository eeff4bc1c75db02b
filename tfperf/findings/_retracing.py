"""Whether a compiled train step compiled again for a later batch shape, and what that costs.

The first shape's first step is the step's first compile, which every run pays; a later
shape whose first step ran far longer than its later ones compiled again. Read from the
end-to-end phase's batch shapes (`ProfileResult.batch_shapes`).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from tfperf.findings._facts import PipelineFacts, fit_got_arrays
from tfperf.results import ProfileResult
from tfperf.results.findings import Evidence, Finding, Level
from tfperf.results.stages import BatchShape
from tfperf.units import format_seconds

#: A batch shape's first step this many times its later steps' median compiled again: a
#: compile takes tens of times a step, while a step's own spread stays within this.
RETRACE_RATIO = 2.0
#: ... and took more than this share of the first shape's first compile beyond its later
#: steps: compiling again re-traces and re-optimises the step, a sizeable part of that first
#: compile, while a step's own jitter is a few milliseconds whatever the compile costs.
RETRACE_SHARE_OF_FIRST = 0.1
#: ... and by more than this, whatever the step: tracing and optimising a function again takes
#: tens of milliseconds at the least, while a step that compiles nothing (an eager PyTorch
#: step) runs its first batch of a new shape within a millisecond or so of its later ones.
RETRACE_MIN_S = 0.01
#: Weight of a cost paid once a run (a compile per batch shape): below every cost paid each
#: step, whose share of a step the weights are.
ONCE_A_RUN_WEIGHT = 0.02


def retracing(result: ProfileResult, facts: PipelineFacts) -> list[Finding]:
    """The first step on a batch shape after the first computed far longer than that shape's
    later steps: a compiled step compiled again for it.

    The first shape's first step is the step's first compile, which every run pays, so it is
    never counted; a later shape's first step counts only past `RETRACE_RATIO` times its later
    steps, past `RETRACE_SHARE_OF_FIRST` of that first compile's extra time and past
    `RETRACE_MIN_S` (a compile again re-traces and re-optimises the step; a few milliseconds
    beyond a short step are noise). Where a later shape came again at its usual time from its
    first step, not every new shape compiles (TensorFlow relaxes a function retraced for
    several shapes to take any): a note, paid a few times a run. Where every shape came again,
    the cost is paid once a run: a note too. Where further shapes came once and none settled,
    each new one compiles again: a fix. A short last batch (shapes that differ in examples
    alone) is told to drop it.
    """
    shapes = result.batch_shapes
    if len(shapes) < 2:
        return []
    floor = max(RETRACE_SHARE_OF_FIRST * shapes[0].retrace_s, RETRACE_MIN_S)
    traced = [
        shape
        for shape in shapes[1:]
        if shape.typical_compute_s
        and shape.first_compute_s > RETRACE_RATIO * shape.typical_compute_s
        and shape.retrace_s > floor
    ]
    if not traced:
        return []
    settled = [s for s in shapes[1:] if s.typical_compute_s and s not in traced]
    extra = sum(shape.retrace_s for shape in traced)
    once = sum(1 for shape in shapes[1:] if shape.steps == 1)
    text = f"Batches came in {len(shapes)} shapes, and {_first_steps(traced, extra, shapes[0])}"
    if settled:
        text += (
            f": a compiled step compiled again for {'them' if len(traced) > 1 else 'it'}; "
            f"{len(settled)} other later shape{'s' * (len(settled) > 1)} ran "
            f"{'their' if len(settled) > 1 else 'its'} first batch at the usual time, so not "
            "every new shape compiles again: this is paid a few times a run."
        )
    elif once:
        more = f"{once} more shape{'s' * (once > 1)}"
        text += (
            ": a compiled step compiles again for each new input shape; "
            f"{more} came only once in the window, and each new shape compiles again."
        )
    else:
        text += (
            ": a compiled step compiles again for each new input shape; every shape came again "
            "at its usual time, so this is paid once a run."
        )
    if _short_last_batch(shapes) and fit_got_arrays(result):
        fix = (
            "`fit` batches arrays itself and keeps the short last batch: a batch_size that "
            "divides the examples it trains on (after any validation_split), or a "
            "tf.data.Dataset batched with drop_remainder=True, keeps one shape."
        )
    elif _short_last_batch(shapes):
        fix = (
            "Dropping the short last batch (tf.data's drop_remainder=True, a DataLoader's "
            "drop_last=True) keeps one shape; it leaves out that batch's examples each epoch."
        )
    else:
        fix = (
            "Pad to a few fixed lengths, or give the step an input signature with None dimensions."
        )
    total = result.end_to_end.duration_s
    keeps_compiling = bool(once) and not settled
    return [
        Finding(
            "retracing",
            Level.FIX if keeps_compiling else Level.NOTE,
            text,
            fix,
            Evidence("end_to_end", len(shapes), unit="shapes"),
            weight=min(1.0, extra / total) if keeps_compiling and total > 0 else ONCE_A_RUN_WEIGHT,
        )
    ]


def _first_steps(traced: Sequence[BatchShape], extra: float, first: BatchShape) -> str:
    took = format_seconds(extra)
    if len(traced) == 1:
        shape = traced[0]
        named = (
            f"of {shape.examples} examples"
            if shape.examples != first.examples
            else f"of shape {shape.shape}"
        )
        return f"the first batch {named} took {took} longer than the later ones"
    return (
        f"the first batch of each of {len(traced)} later shapes took {took} longer in all than "
        "later ones of its shape"
    )


def _short_last_batch(shapes: Sequence[BatchShape]) -> bool:
    """Two shapes, the second of fewer examples, no more often, and otherwise the same
    tensors: a dataset's last batch, short of a whole one."""
    if len(shapes) != 2 or shapes[1].examples >= shapes[0].examples:
        return False
    if shapes[1].steps > shapes[0].steps:
        return False
    full, short = (_dims(shape.shape) for shape in shapes)
    return full is not None and short is not None and full == short


def _dims(shape: str) -> list[tuple[object, ...]] | None:
    """Each tensor's dimensions after its first (the examples), from a `BatchShape.shape` such
    as `(32, 17), (32,)`; None where the text is not such a list."""
    try:
        tensors = ast.literal_eval(f"[{shape}]")
    except (ValueError, SyntaxError):
        return None
    if not all(isinstance(dims, tuple) for dims in tensors):
        return None
    return [dims[1:] for dims in tensors]
