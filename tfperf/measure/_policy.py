"""The pipeline model's policy: every threshold it applies, and the stage words it reads.

One record, so a rule's number, unit and reason stand in one place; how each was calibrated is
in docs/notes/calibration.md, and docs/limit.md derives the rules they serve.
"""

from __future__ import annotations

import dataclasses

from tfperf.results import RATE_NOISE
from tfperf.results.stages import StageKind


@dataclasses.dataclass(frozen=True)
class ModelPolicy:
    """The pipeline model's constants, each with its unit and why it has its value."""

    #: ratio (wall ÷ CPU per example). A stage blocks (I/O, sleeps, remote calls) when one
    #: thread's wall time per example exceeds its CPU time this many times.
    blocking_ratio: float = 2.0
    #: threads. Most tfperf proposes for one stage or pool: each tf.data thread holds a stack
    #: and an element in flight, and past a few hundred the scheduler, not the work, sets the
    #: pace.
    thread_cap: int = 256
    #: ratio (rate ÷ rate). A blocking stage is sized for at most this many times the CPU
    #: roofline and each sequential stage's rate: the roofline errs low (it counts the
    #: runtime's idle threads spinning), a sequential rate is measured alone (a slow element
    #: holds back the ones behind it), and past it extra threads only wait and contend (for
    #: the GIL, when the stage calls Python).
    blocking_headroom: float = 2.0
    #: calls per core. A computing stage keeps this many calls in flight per core: calls
    #: queued behind the running ones absorb the spread of per-element costs.
    calls_per_core: int = 2
    #: share of the predicted rate. A private pool may hold the input this near the
    #: prediction: a cap within the model's own error costs nothing it can tell, while each
    #: core more lets the input's threads contend with the step.
    pool_tolerance: float = 0.9
    #: share of the pipeline's wall time per example. A run of sequential stages adding less
    #: is left alone.
    negligible_share: float = 0.02
    #: share of upstream's time per example. Sequential stages after an asynchronous one run
    #: beside it; they bind only when their cut is this much slower than the cut before. Set
    #: well above the stage analysis's noise (a few percent between cuts): a noisy cut read as
    #: a bound would cap the limit near the baseline's own rate.
    resolvable_share: float = 0.25
    #: share of the limit. A measured rate this near the limit, either way, cannot tell
    #: whether the pipeline is at it: the noise between repeated windows (`RATE_NOISE`).
    limit_noise: float = RATE_NOISE
    #: The stage arguments that run a stage's work on several threads, as the stage records
    #: spell them (tf.data's).
    parallel_arguments: tuple[str, ...] = (
        "num_parallel_calls",
        "num_parallel_reads",
        "cycle_length",
    )
    #: Those that run a stage on threads of its own, apart from its consumer (a sequential
    #: interleave takes `cycle_length` alone and runs in its consumer's thread).
    async_arguments: tuple[str, ...] = ("num_parallel_calls", "num_parallel_reads")
    #: The stage methods (a label's head, `map` of `map(parse)`) that take a parallelism
    #: argument, so tuning can run them in parallel whether or not the pipeline passes one:
    #: priced at their tuned rate, never as a sequential bound. `padded_batch`, `filter`,
    #: `unbatch` and a generator cannot.
    parallelisable: frozenset[str] = frozenset(
        {
            "map",
            "interleave",
            "batch",
            "map_and_batch",
            "TFRecordDataset",
            "TextLineDataset",
            "FixedLengthRecordDataset",
        }
    )
    #: Stage kinds never counted as a sequential bound. What the stage analysis adds for a
    #: shuffle is the refill after each restart, which the restart term counts; for a
    #: prefetch, upstream's time showing through.
    never_sequential: frozenset[StageKind] = frozenset({StageKind.SHUFFLE, StageKind.PREFETCH})


#: The policy the model applies.
POLICY = ModelPolicy()
#: Most threads for one stage or pool (`ModelPolicy.thread_cap`), for the tuner's ranges.
THREAD_CAP = POLICY.thread_cap
