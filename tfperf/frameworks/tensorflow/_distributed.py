"""What a profile under a `tf.distribute` strategy adds: replicas, batches, per-replica rate."""

from __future__ import annotations

import collections
from typing import Any

from tfperf.frameworks.tensorflow import _tf
from tfperf.frameworks.tensorflow._build import Built
from tfperf.results import ProfileResult
from tfperf.results.scaling import DistributedInput, Distribution


def distribution_of(built: Built, result: ProfileResult) -> Distribution | None:
    """The strategy's replicas and the per-replica figures of `result`; None without one."""
    if built.strategy is None or built.distributed is None:
        return None
    strategy = built.strategy
    replicas = int(strategy.num_replicas_in_sync)
    global_batch = typical_examples(result)
    rate = result.end_to_end.examples_per_sec
    return Distribution(
        strategy=type(strategy).__name__,
        replicas=replicas,
        devices=_tf.replica_devices(strategy),
        input=(
            DistributedInput.FROM_FUNCTION
            if built.distributed.from_function
            else DistributedInput.DISTRIBUTE_DATASET
        ),
        global_batch=global_batch,
        per_replica_batch=global_batch / replicas if global_batch is not None else None,
        examples_per_sec=rate,
        examples_per_sec_per_replica=rate / replicas,
    )


def typical_examples(result: ProfileResult) -> int | None:
    """The examples per step most measured end-to-end steps had (the global batch)."""
    counts = collections.Counter(
        record.examples for record in result.end_to_end.records if not record.warmup
    )
    return counts.most_common(1)[0][0] if counts else None


def epoch_of(built: Built, epoch_steps: int | None) -> int | None:
    """Steps in one epoch when the dataset's own count is not one step per element.

    A dataset built per input pipeline (`distribute_datasets_from_function`) yields one
    per-replica batch per element, and a step takes one for each local replica.
    """
    distributed: Any = built.distributed
    if epoch_steps is not None or distributed is None or not distributed.from_function:
        return epoch_steps
    elements = _tf.cardinality(built.dataset)
    replicas = int(built.strategy.num_replicas_in_sync) if built.strategy is not None else 1
    return max(1, elements // replicas) if elements is not None else None
