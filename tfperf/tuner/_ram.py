"""A configuration whose buffers would not fit the RAM budget is known before it runs.

The baseline's profile holds what each buffering stage held (`ProfileResult.memory`) and the
peak RSS around it. A proposed configuration changes how many elements some of those buffers
hold (`shuffle_buffer`, `prefetch`, `num_parallel_calls`, or a call site's value) and how large
a batch is (`batch_size`); the same account, repriced, predicts its peak: the baseline's peak
plus what its buffers would hold more (or less). Over the budget, the trial is pruned with the
figures, unrun, as a trial over the budget would be killed after loading its buffers.

A buffer is matched to the knob that sizes it, the one declared as the argument of the call
that holds it (`Knob.call`), by value: a shuffle holding as many elements as the baseline's
`shuffle_buffer` (or a shuffle site's value) is the one that knob sets, unless one pass fills
it first (`BufferHold.fills_a_pass`). Other buffers keep their size; AUTOTUNE is tf.data's.

A DataLoader's workers are priced the same way: each holds the private pages the baseline's
workers held at the end of a pass (`LoaderReport.worker_memory`), not at its start, since a
dataset held in Python objects is copied into each worker as a pass reads it and the end of
the pass is where the budget breaks. The trainer keeps its share of the baseline's peak.
"""

from __future__ import annotations

from tfperf.knobs import AUTOTUNE, KNOBS, Knobs, SiteKind, SiteName
from tfperf.results import ProfileResult
from tfperf.results.stages import BufferHold
from tfperf.units import format_bytes


def predicted_rss_bytes(baseline: ProfileResult, before: Knobs, after: Knobs) -> float | None:
    """The peak RSS `after` would reach: the baseline's, with its buffers repriced, or with its
    DataLoader's workers each at the private bytes the baseline's held at a pass's end.

    None when the baseline measured no peak, and neither read buffers nor workers' memory.
    """
    workers = _loader_bytes(baseline, after)
    if workers is not None:
        return workers
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
    over = f"over the {format_bytes(budget_bytes)} budget (--ram-budget)"
    loader = baseline.loader
    if loader is not None and loader.worker_memory and _loader_bytes(baseline, after) is not None:
        each = format_bytes(loader.worker_memory.end_per_worker_bytes)
        return (
            f"{_workers(after, loader.workers)} workers would take the peak "
            f"host RAM to about {format_bytes(predicted)} (the baseline's trainer, and each "
            f"worker at the {each} of private memory a baseline worker held at the end of a "
            f"pass), {over}"
        )
    return (
        f"its buffers would take the peak host RAM to about {format_bytes(predicted)} (the "
        f"baseline's peak, with each buffer repriced for these knobs), {over}"
    )


def _loader_bytes(baseline: ProfileResult, after: Knobs) -> float | None:
    """The trainer's share of the baseline's peak plus each of `after`'s workers at a baseline
    worker's end-of-pass private bytes; None without workers' memory in the baseline."""
    loader = baseline.loader
    if loader is None or loader.worker_memory is None or loader.host_ram_peak_bytes is None:
        return None
    trainer = loader.host_ram_peak_bytes - (loader.workers_ram_peak_bytes or 0)
    workers = _workers(after, loader.workers)
    return trainer + workers * loader.worker_memory.end_per_worker_bytes


def _workers(after: Knobs, measured: int) -> int:
    """`after`'s DataLoader workers: its knob, else a call site's `num_workers`, else as many
    as the baseline ran (`measured`)."""
    if after.num_workers is not None:
        return after.num_workers
    for site, value in after.sites.items():
        if SiteName.parse(site).kind is SiteKind.WORKERS and isinstance(value, int):
            return value
    return measured


def _bytes_under(hold: BufferHold, before: Knobs, after: Knobs) -> float:
    elements = _elements_under(hold, before, after)
    per_element = hold.bytes_per_element
    if hold.batched and before.batch_size > 0:
        per_element *= after.batch_size / before.batch_size
    return elements * per_element


def _elements_under(hold: BufferHold, before: Knobs, after: Knobs) -> int:
    knob = next((k for k in KNOBS if k.call and k.call[0] == hold.kind.method), None)
    if knob is None or hold.fills_a_pass:
        return hold.elements
    was, now = getattr(before, knob.name), getattr(after, knob.name)
    for site, value in before.sites.items():
        name = SiteName.parse(site)
        if (name.method, name.argument) == knob.call and value == hold.elements:
            was, now = value, after.sites.get(site, value)
    if was != hold.elements or not isinstance(now, int) or now == AUTOTUNE or now is None:
        return hold.elements
    return now
