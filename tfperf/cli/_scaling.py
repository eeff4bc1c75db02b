"""`tfperf profile --scaling [N]`: the pipeline at 1, 2, 4, ... N data-parallel replicas.

TensorFlow fixes a process's logical devices once, so each replica count is measured in a fresh
child (`tfperf.trials.run_trial`) that lays out its devices before the pipeline loads: on a
machine with GPUs, the first k GPUs (through `CUDA_VISIBLE_DEVICES`); without, k logical CPU
devices, which share the same cores, so the curve then shows the input's scaling rather than a
GPU speed-up. Every point runs `MirroredStrategy` (`--strategy mirrored`), whatever `--strategy`
the main profile used, since only it spreads a step over replicas; a script keeps the strategy
it builds itself (TensorFlow refuses a second around it), over the count's devices. The
per-replica batch stays
fixed: the `batch_size` knob, the global batch, is multiplied by the count, as data-parallel
users scale; a file that sets its batch in code keeps its global batch. The figures become a
`ScalingCurve` (`tfperf.measure.scaling_curve`) stored in the profile's JSON as `scaling`.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from tfperf.cli._common_args import trial_request
from tfperf.cli._devices import gpu_flags
from tfperf.cli._stall import stall_limit
from tfperf.cli.base import say
from tfperf.frameworks import DeviceLayout, StrategyKind
from tfperf.results import ProfileResult, TrialStatus
from tfperf.results.scaling import (
    BatchScaling,
    ReplicaDevice,
    ScalingCurve,
    ScalingFailure,
    ScalingPoint,
)

if TYPE_CHECKING:
    from tfperf.hardware import Machine
    from tfperf.knobs import Knobs
    from tfperf.measure import ProgressCallback
    from tfperf.pipeline import PipelineFile

#: `--scaling` with no count: as many replicas as GPUs, else as CPUs.
AUTO = 0
#: The strategy every point runs: the one that puts a replica on each device.
STRATEGY = StrategyKind.MIRRORED


def add_scaling_argument(parser: argparse.ArgumentParser) -> None:
    """Adds `--scaling [N]` to `tfperf profile`."""
    parser.add_argument(
        "--scaling",
        type=_replica_limit,
        nargs="?",
        const=AUTO,
        default=None,
        metavar="N",
        help="after the profile, measure the pipeline again at 1, 2, 4, ... N replicas under "
        "MirroredStrategy, each in a fresh process, keeping the per-replica batch fixed "
        "(batch_size times the replicas), and say up to which count the input keeps up. N "
        "defaults to the number of GPUs, else the number of CPUs (logical CPU replicas share "
        "the cores: the curve then shows the input's scaling, not a GPU speed-up). See "
        "docs/scaling.md",
    )


def _replica_limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a number of replicas (1 or more), but got {text!r}"
        ) from None
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"must be a number of replicas (1 or more), but got {value}"
        )
    return value


@dataclasses.dataclass(frozen=True)
class ScalingPlan:
    """The replica counts to measure and the devices each replica gets.

    Attributes:
        counts: 1, 2, 4, ... up to the limit.
        device: GPUs when the machine has any, else logical CPU devices.
        gpus: the visible GPUs as `CUDA_VISIBLE_DEVICES` names them; empty on CPU.
        capped_from: the count asked for when the machine has fewer GPUs (or, on CPU, fewer
            cores); else None.
    """

    counts: tuple[int, ...]
    device: ReplicaDevice
    gpus: tuple[str, ...] = ()
    capped_from: int | None = None


def scaling_plan(requested: int, machine: Machine, visible: str | None = None) -> ScalingPlan:
    """What `--scaling` measures on `machine`: `requested` replicas, or AUTO for all devices.

    `visible` is `CUDA_VISIBLE_DEVICES` as set (None: read from the environment).
    """
    from tfperf.measure.scaling import replica_counts

    if machine.has_gpu:
        gpus = _visible_gpus(len(machine.gpu_names), visible)
        limit = len(gpus) if requested == AUTO else min(requested, len(gpus))
        capped = requested if requested > len(gpus) else None
        return ScalingPlan(replica_counts(limit), ReplicaDevice.GPU, gpus, capped)
    # Logical CPU replicas beyond the cores only take turns on them, each count in a process
    # of its own: the curve gains nothing past the CPU count and the run grows by a doubling.
    cpus = machine.cpu_count
    limit = cpus if requested == AUTO else min(requested, cpus)
    capped = requested if requested > cpus else None
    return ScalingPlan(replica_counts(limit), ReplicaDevice.CPU, capped_from=capped)


def _visible_gpus(count: int, visible: str | None) -> tuple[str, ...]:
    if visible is None:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        return tuple(name.strip() for name in visible.split(",") if name.strip())[:count]
    return tuple(str(index) for index in range(count))


def with_scaling(
    result: ProfileResult,
    args: argparse.Namespace,
    pipeline: PipelineFile,
    knobs: Knobs,
    progress: ProgressCallback | None = None,
) -> ProfileResult:
    """`result` with the scaling curve `--scaling` asks for; `result` itself without the flag."""
    if getattr(args, "scaling", None) is None:
        return result
    from tfperf.hardware import detect_machine

    plan = scaling_plan(args.scaling, detect_machine())
    say(_plan_message(plan), args)
    return dataclasses.replace(result, scaling=measure_curve(plan, args, pipeline, knobs, progress))


def measure_curve(
    plan: ScalingPlan,
    args: argparse.Namespace,
    pipeline: PipelineFile,
    knobs: Knobs,
    progress: ProgressCallback | None = None,
) -> ScalingCurve:
    """Profiles each count of `plan` in a child of its own and builds the curve."""
    from tfperf.measure.scaling import scaling_curve, scaling_point

    points: list[ScalingPoint] = []
    failures: list[ScalingFailure] = []
    for count in plan.counts:
        say(f"Scaling: {_replicas(count)}...", args)
        strategy = _strategy_for(pipeline)
        knobs_of = _scaled(pipeline, knobs, count)
        measured = _measure_count(plan, count, args, knobs_of, progress, strategy)
        if isinstance(measured, ProfileResult):
            points.append(scaling_point(count, measured, replicas_in_step(measured)))
        else:
            failures.append(measured)
    batch = _batch_scaling(pipeline)
    return scaling_curve(
        points,
        device=plan.device,
        batch=batch,
        per_replica_batch=knobs.batch_size if batch is BatchScaling.PER_REPLICA_FIXED else None,
        strategy=STRATEGY.value,
        failures=failures,
    )


def _strategy_for(pipeline: PipelineFile) -> StrategyKind | None:
    """Mirrored, by name; a script keeps the strategy it builds itself (TensorFlow refuses a
    second one around it), and the count's devices are what it finds."""
    from tfperf.pipeline import PipelineKind

    return None if pipeline.kind is PipelineKind.SCRIPT else STRATEGY


def _batch_scaling(pipeline: PipelineFile) -> BatchScaling:
    from tfperf.pipeline import PipelineKind

    # Only a file whose make_dataset reads the knobs gets the batch_size tfperf sets.
    if pipeline.kind is PipelineKind.KNOBS:
        return BatchScaling.PER_REPLICA_FIXED
    return BatchScaling.GLOBAL_FIXED


def _scaled(pipeline: PipelineFile, knobs: Knobs, count: int) -> Knobs:
    """The knobs of one count: the global batch is the per-replica batch times the count."""
    if _batch_scaling(pipeline) is not BatchScaling.PER_REPLICA_FIXED:
        return knobs
    return knobs.replace(batch_size=knobs.batch_size * count)


def replicas_in_step(result: ProfileResult) -> int:
    """How many replicas the child's train step ran across; 1 when it was not distributed."""
    return result.distribution.replicas if result.distribution is not None else 1


def _measure_count(
    plan: ScalingPlan,
    count: int,
    args: argparse.Namespace,
    knobs: Knobs,
    progress: ProgressCallback | None,
    strategy: StrategyKind | None = STRATEGY,
) -> ProfileResult | ScalingFailure:
    from tfperf.trials import Budgets, run_trial

    # A count runs on devices and a strategy of its own, without the profile's budget or stages.
    request = dataclasses.replace(
        trial_request(args, knobs),
        layout=DeviceLayout(count if plan.device is ReplicaDevice.CPU else None, *gpu_flags(args)),
        strategy=strategy,
        analyse_stages=False,
        budget_s=None,
    )
    with _gpus_visible(plan.gpus[:count] if plan.device is ReplicaDevice.GPU else None):
        budgets = Budgets(timeout_s=args.timeout, stall_s=stall_limit(args))
        outcome = run_trial(request, budgets, on_progress=progress)
    if outcome.status is TrialStatus.COMPLETE and outcome.result is not None:
        return outcome.result
    return ScalingFailure(count, f"{outcome.status.value}: {outcome.reason}")


@contextlib.contextmanager
def _gpus_visible(gpus: Sequence[str] | None) -> Iterator[None]:
    """Children started meanwhile see only `gpus` (None: leave the environment alone)."""
    if gpus is None:
        yield
        return
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
    try:
        yield
    finally:
        if before is None:
            del os.environ["CUDA_VISIBLE_DEVICES"]
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = before


def _plan_message(plan: ScalingPlan) -> str:
    counts = ", ".join(str(count) for count in plan.counts)
    if plan.device is ReplicaDevice.GPU:
        capped = (
            f" (--scaling {plan.capped_from} asked for more replicas than the {len(plan.gpus)} "
            "GPUs)"
            if plan.capped_from is not None
            else ""
        )
        return f"Scaling: {counts} replicas, one per GPU{capped}, each in a fresh process."
    capped = (
        f" (--scaling {plan.capped_from} asked for more replicas than this machine's CPUs, "
        "which they would only take turns on)"
        if plan.capped_from is not None
        else ""
    )
    return (
        f"Scaling: {counts} replicas on logical CPU devices{capped}, each in a fresh process "
        "(they share the CPU cores: the curve shows the input's scaling, not a GPU speed-up)."
    )


def _replicas(count: int) -> str:
    return f"{count} replica{'s' * (count != 1)}"
