"""How a pipeline feeds 1, 2, 4, ... data-parallel replicas: the scaling curve of a profile.

`tfperf profile --scaling` measures the pipeline once per replica count, each in a fresh
process (TensorFlow fixes its logical devices once per process), and keeps one `ScalingPoint`
per count. The answer a data-parallel user needs is in the record, not in its rendering:
`feeds_replicas` is the largest count the input keeps up with (the wait share stays under
`keeps_up_below`, the threshold of tfperf's compute-bound verdict), and `next_replicas` /
`next_wait_fraction` say what happens one count further. The figures are computed by
`tfperf.measure.scaling_curve`; this module holds the records only, with no TensorFlow.

Example:
    >>> curve = ProfileResult.load("reports/p-profile.json").scaling  # doctest: +SKIP
    >>> curve.feeds_replicas, curve.next_replicas, curve.next_wait_fraction  # doctest: +SKIP
    (2, 4, 0.48)
"""

from __future__ import annotations

import dataclasses
from enum import Enum

from tfperf.results._json import JsonRecord


class ReplicaDevice(str, Enum):
    """What one replica ran on."""

    GPU = "gpu"  # one GPU per replica: the curve is the real data-parallel speed-up
    CPU = "cpu"  # logical CPU devices sharing the same cores: the curve shows the input's scaling


class BatchScaling(str, Enum):
    """How the batch changed with the replica count."""

    #: The `batch_size` knob was multiplied by the replica count: the per-replica batch stays
    #: fixed and the global batch grows, as data-parallel users scale.
    PER_REPLICA_FIXED = "per-replica-fixed"
    #: The file sets its batch in code (no `batch_size` knob reaches it): the global batch stays
    #: as written and each replica gets a share of it.
    GLOBAL_FIXED = "global-fixed"


@dataclasses.dataclass
class ScalingPoint:
    """One replica count, measured end to end, the pipeline alone and the model alone.

    Attributes:
        replicas: replicas the point was asked to run (devices laid out for it).
        replicas_in_step: replicas the train step actually ran across, as the child reported
            it; 1 when the step was not distributed (then the point measures one replica on
            `replicas` devices, and the curve says so).
        global_batch: examples per end-to-end step, as measured (all replicas together).
        examples_per_sec: end-to-end examples per second, all replicas together.
        input_wait_fraction: share of each step spent waiting for input (the profile's figure).
        compute_only_examples_per_sec: the model alone on cached batches: the ceiling if input
            were free; None when that phase did not run.
        pipeline_only_examples_per_sec: the input pipeline alone, with no model; None when
            that phase did not run.
        keeps_up: the wait share is under the curve's `keeps_up_below`.
    """

    replicas: int
    replicas_in_step: int
    global_batch: int
    examples_per_sec: float
    input_wait_fraction: float
    compute_only_examples_per_sec: float | None
    pipeline_only_examples_per_sec: float | None
    keeps_up: bool

    @property
    def per_replica_examples_per_sec(self) -> float:
        """End-to-end examples per second that each replica trained on."""
        return self.examples_per_sec / self.replicas

    @property
    def per_replica_batch(self) -> float:
        """Examples in one replica's share of a step."""
        return self.global_batch / self.replicas


@dataclasses.dataclass
class ScalingFailure:
    """A replica count that could not be measured, and why (the trial's reason)."""

    replicas: int
    reason: str


@dataclasses.dataclass
class ScalingCurve(JsonRecord):
    """Examples/s and input wait against the number of replicas, and the answer they give.

    Attributes:
        points: measured counts, in increasing order of `replicas`.
        device: what each replica ran on.
        batch: how the batch changed with the count.
        per_replica_batch: the `batch_size` knob at one replica (PER_REPLICA_FIXED), else None.
        strategy: the strategy each point ran under, by its tfperf name (`mirrored`).
        keeps_up_below: the wait share under which input keeps up (tfperf's compute-bound
            threshold, 5% as on TensorBoard's scale).
        feeds_replicas: the largest measured count up to which every count keeps up; None when
            the input falls behind already at the first count.
        next_replicas: the first measured count where the input falls behind; None when it keeps
            up at every measured count.
        next_wait_fraction: the wait share at `next_replicas`; None with it.
        failures: counts that could not be measured (left out of `points`).
    """

    points: list[ScalingPoint]
    device: ReplicaDevice
    batch: BatchScaling
    per_replica_batch: int | None
    strategy: str
    keeps_up_below: float
    feeds_replicas: int | None
    next_replicas: int | None
    next_wait_fraction: float | None
    failures: list[ScalingFailure] = dataclasses.field(default_factory=list)

    @property
    def distributed(self) -> bool:
        """Whether every point's step really ran across its replicas."""
        return all(point.replicas_in_step == point.replicas for point in self.points)

    def point(self, replicas: int) -> ScalingPoint | None:
        """The point measured at `replicas`, or None."""
        return next((p for p in self.points if p.replicas == replicas), None)
