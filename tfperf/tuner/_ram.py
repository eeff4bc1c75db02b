"""A configuration whose buffers would not fit the RAM budget is known before it runs.

The baseline's profile holds what each buffering stage held (`ProfileResult.memory`) and the
peak RSS around it. A proposed configuration changes how many elements some of those buffers
hold (`shuffle_buffer`, `prefetch`, `num_parallel_calls`, or a call site's value) and how large
a batch is (`batch_size`); the same account, repriced, predicts its peak: the baseline's peak
plus what its buffers would hold more (or less). Over the budget, the trial is pruned with the
figures, unrun, as a trial over the budget would be killed after loading its buffers.

A buffer is matched to the knob that sizes it by kind and by value: a shuffle holding as many
elements as the baseline's `shuffle_buffer` (or a shuffle site's value) is the one that knob
sets. A buffer no knob matches keeps its size; AUTOTUNE values are left to tf.data.
"""

from __future__ import annotations

from tfperf.knobs import AUTOTUNE, Knobs, SiteName
from tfperf.results import ProfileResult
from tfperf.results.stages import BufferHold, BufferKind
from tfperf.units import format_bytes

__all__ = ["predicted_rss_bytes", "ram_problem"]

#: The knob that sizes each kind of buffer, and the method and argument of a call site that do.
_KNOB = {
    BufferKind.SHUFFLE: ("shuffle_buffer", "shuffle", "buffer_size"),
    BufferKind.PREFETCH: ("prefetch", "prefetch", "buffer_size"),
    BufferKind.PARALLEL_MAP: ("num_parallel_calls", "map", "num_parallel_calls"),
    BufferKind.INTERLEAVE: ("cycle_length", "interleave", "cycle_length"),
}


def predicted_rss_bytes(baseline: ProfileResult, before: Knobs, after: Knobs) -> float | None:
    """The peak RSS `after` would reach: the baseline's, with its buffers repriced.

    None when the baseline measured no peak or read no buffers.
    """
    if baseline.memory is None or baseline.host_memory is None:
        return None
    change = sum(_bytes_under(hold, before, after) - hold.bytes for hold in baseline.memory.holds)
    return baseline.host_memory.peak_rss_bytes + change


def ram_problem(
    baseline: ProfileResult | None, before: Knobs, after: Knobs, budget_bytes: int | None
) -> str | None:
    """Why `after` would not fit `budget_bytes`, from the baseline's account; None if it fits."""
    if baseline is None or not budget_bytes:
        return None
    predicted = predicted_rss_bytes(baseline, before, after)
    if predicted is None or predicted <= budget_bytes:
        return None
    return (
        f"its buffers would take the peak host RAM to about {format_bytes(predicted)} (the "
        "baseline's peak, with each buffer repriced for these knobs), over the "
        f"{format_bytes(budget_bytes)} budget (--ram-budget)"
    )


def _bytes_under(hold: BufferHold, before: Knobs, after: Knobs) -> float:
    elements = _elements_under(hold, before, after)
    per_element = hold.bytes_per_element
    if hold.batched and before.batch_size > 0:
        per_element *= after.batch_size / before.batch_size
    return elements * per_element


def _elements_under(hold: BufferHold, before: Knobs, after: Knobs) -> int:
    names = _KNOB.get(hold.kind)
    if names is None or (hold.note and "one pass" in hold.note):
        return hold.elements
    knob, method, argument = names
    was, now = getattr(before, knob), getattr(after, knob)
    for site, value in before.sites.items():
        name = SiteName.parse(site)
        if name.method == method and name.argument == argument and value == hold.elements:
            was, now = value, after.sites.get(site, value)
    if was != hold.elements or not isinstance(now, int) or now == AUTOTUNE or now is None:
        return hold.elements
    return now
