"""How a profile under a `tf.distribute` strategy reads: replicas, devices, batches, rates.

`distribution_rows` is the data (label, value pairs, tested by equality); the terminal section
and the HTML table both draw from it.
"""

from __future__ import annotations

from tfperf.results import ProfileResult
from tfperf.results.scaling import DistributedInput, Distribution

_INPUT = {
    DistributedInput.DISTRIBUTE_DATASET: (
        "strategy.experimental_distribute_dataset: global batches split across replicas"
    ),
    DistributedInput.FROM_FUNCTION: (
        "strategy.distribute_datasets_from_function: make_dataset(knobs, input_context) "
        "batches per replica"
    ),
}


def distribution_rows(distribution: Distribution) -> list[tuple[str, str]]:
    """The figures of a distributed profile, as (label, value) rows."""
    global_batch = "-" if distribution.global_batch is None else str(distribution.global_batch)
    per_replica = distribution.per_replica_batch
    return [
        ("strategy", f"{distribution.strategy}, {_replicas(distribution.replicas)}"),
        ("devices", ", ".join(distribution.device_names) or "unknown"),
        ("input", _INPUT[distribution.input]),
        ("global batch", global_batch),
        ("per-replica batch", "-" if per_replica is None else f"{per_replica:g}"),
        ("examples/s, all replicas", f"{distribution.examples_per_sec:,.1f}"),
        ("examples/s, per replica", f"{distribution.examples_per_sec_per_replica:,.1f}"),
    ]


def distribution_text(result: ProfileResult) -> str:
    """The terminal section; empty when the profile ran without a strategy."""
    if result.distribution is None:
        return ""
    rows = distribution_rows(result.distribution)
    width = max(len(label) for label, _ in rows)
    lines = ["Distribution (the wait above is for all replicas' input together):"]
    lines.extend(f"  {label:<{width}}  {value}" for label, value in rows)
    return "\n".join(lines)


def _replicas(count: int) -> str:
    return f"{count} replica{'s' * (count != 1)}"
