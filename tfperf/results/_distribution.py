"""How a profile ran under a `tf.distribute` strategy: replicas, devices, batches, per-replica rate.

A data-parallel step consumes one global batch, split across the replicas; the input pipeline
must feed all of them. `Distribution` keeps what the profile saw of that split, so a report
can say "2 replicas on CPU:0 and CPU:1, 32 examples each, 410 examples/s each". No TensorFlow
here: `tfperf.measure` fills it in from the live strategy.

Example:
    >>> distribution = ProfileResult.load("p-profile.json").distribution  # doctest: +SKIP
    >>> distribution.replicas, distribution.per_replica_batch  # doctest: +SKIP
    (2, 32)
"""

from __future__ import annotations

import dataclasses
from enum import Enum

from tfperf.results._json import JsonRecord


class DistributedInput(str, Enum):
    """How the dataset reached the replicas."""

    #: `strategy.experimental_distribute_dataset`: one dataset of global batches, split by
    #: tf.distribute into per-replica batches.
    DISTRIBUTE_DATASET = "experimental_distribute_dataset"
    #: `strategy.distribute_datasets_from_function`: the file's `make_dataset(knobs,
    #: input_context)` builds one pipeline per input worker, batched per replica.
    FROM_FUNCTION = "distribute_datasets_from_function"


@dataclasses.dataclass
class Distribution(JsonRecord):
    """One profile's strategy and how its batches and throughput split across replicas.

    Attributes:
        strategy: the strategy's class name, e.g. "MirroredStrategy".
        replicas: `strategy.num_replicas_in_sync`.
        devices: the replicas' devices, e.g. ["/job:localhost/replica:0/task:0/device:CPU:0"].
        input: how the dataset was distributed.
        global_batch: examples per step over all replicas (the typical end-to-end step);
            None when no step was measured.
        per_replica_batch: `global_batch / replicas`, the batch each replica computes on.
        examples_per_sec: end-to-end examples/s over all replicas.
        examples_per_sec_per_replica: `examples_per_sec / replicas`.
    """

    strategy: str
    replicas: int
    devices: list[str]
    input: DistributedInput
    global_batch: int | None
    per_replica_batch: float | None
    examples_per_sec: float
    examples_per_sec_per_replica: float

    @property
    def device_names(self) -> list[str]:
        """The devices as people write them: `CPU:0` rather than the full TensorFlow name."""
        return [device.rsplit("device:", 1)[-1] for device in self.devices]
