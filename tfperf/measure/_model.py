"""A model of the pipeline from what the profiler measured: its limit, threads and estimate.

Pure functions over plain records (a `StageReport`, the compute-only rate, the core count): no
clock and no TensorFlow, so tests feed hand-built figures and assert exact numbers. From the
stage costs (`_costs`) and the limit (`_limit`, held against measured rates by `_revise`):

- the input's CPU per example for the roofline is the stage analysis's, or one measured at a
  higher rate (`nearest_limit_input_cpu`: it falls as the rate rises);
- the threads a stage needs (Little's law): `threads = target rate x wall per example`, the
  target being the limit: more threads cannot make the stage deliver more than the rest allows;
  a computing stage gets all the calls the cores hold (`ModelPolicy.calls_per_core` per core);
  a blocking stage's threads wait rather than compute, so its target allows
  `ModelPolicy.blocking_headroom` times the CPU roofline and each sequential stage's rate, and
  no more: idle threads past it only contend;
- the estimate: the configuration with those thread counts, and the rate predicted for it;
- restarts: a finite dataset refills its shuffle buffer every epoch, and the model idles
  while it does, so the predicted rate is the steady one `r` times `E / (E + R r / f)` (E
  examples per epoch, R examples refilled: the baseline's measured seconds per restart times
  its pipeline-alone rate; f the faster of `r` and the model alone, since the buffer drains
  without input at the epoch's end);
- other training settings: the limit and the estimate restated with the model alone timed
  under a larger batch or another precision (`TrainingRate`, measured in the baseline trial).

See docs/limit.md for the derivation and a worked example.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

from tfperf.measure._costs import StageCost, autotuned_parallelism, stage_costs
from tfperf.measure._limit import pipeline_limit
from tfperf.measure._policy import POLICY
from tfperf.measure._revise import measured_rates, revise_limit, split_rates
from tfperf.results import Limit, LimitBound, PhaseResult, ProfileResult, TrainingRate
from tfperf.results.stages import StageReport, StageStat


@dataclasses.dataclass(frozen=True)
class PipelineModel:
    """The model of one pipeline on one machine: stage costs, the limit and the thread counts.

    `threads` maps a parallelism argument (`num_parallel_calls`, ...) to the threads the
    stages it drives need (the most over them), a stage written sequential under the argument
    tuning sets on it (`StageCost.tuned_argument`); `pool_threads` is what a private pool needs
    for them all (`_pool_threads`), for `private_threadpool_size`;
    `predicted_examples_per_sec` is what the model expects from those thread counts (the
    limit unless `ModelPolicy.thread_cap` stops a stage short of it).
    """

    stages: tuple[StageCost, ...]
    limit: Limit
    cores: int
    threads: dict[str, int]
    pool_threads: int
    predicted_examples_per_sec: float
    #: The steady rate's share left after the epoch's restarts (1.0: no restart cost).
    restart_factor: float = 1.0
    #: CPU seconds the model's step spends per example (None: neither sampled nor timed).
    model_cpu_s_per_example: float | None = None
    #: CPU seconds the input spends per example, as the CPU roofline counts it (None: unknown).
    input_cpu_s_per_example: float | None = None

    @property
    def cores_for_input(self) -> int | None:
        """The fewest whole cores whose pool holds the input within `ModelPolicy.pool_tolerance`
        of the predicted rate (`pool_cap`), between one and the machine's; None when the input's
        CPU per example is unknown.

        A pool of `n` threads holds the input to `n` cores. One core fewer than it spends at
        the predicted rate caps the rate below the prediction; each core more lets its threads
        contend with the model's step for the same cores.

        Example:
            >>> model = PipelineModel((), None, 2, {}, 4, 2000.0, input_cpu_s_per_example=7e-4)
            >>> model.cores_for_input  # 1.4 cores at 2,000/s; one core holds it to 1,429/s
            2
            >>> model = PipelineModel((), None, 2, {}, 4, 2000.0, input_cpu_s_per_example=5.4e-4)
            >>> model.cores_for_input  # 1.08 cores; one holds it to 1,852/s, within 10%
            1
        """
        if not self.input_cpu_s_per_example:
            return None
        needed = self.predicted_examples_per_sec * self.input_cpu_s_per_example
        return min(self.cores, max(1, math.ceil(POLICY.pool_tolerance * needed - 1e-9)))

    def pool_cap(self, pool: int) -> float | None:
        """The rate a private pool of `pool` threads holds the input to: `pool` cores ÷ the
        input's CPU seconds per example; None when that is unknown.

        Example:
            >>> model = PipelineModel((), None, 2, {}, 4, 2400.0, input_cpu_s_per_example=5e-4)
            >>> model.pool_cap(1)
            2000.0
        """
        if not self.input_cpu_s_per_example:
            return None
        return pool / self.input_cpu_s_per_example

    @property
    def blocks(self) -> bool:
        """Whether a stage tuning runs in parallel mostly waits (its elements arrive in
        bursts)."""
        return any(s.blocking and s.tuned_argument is not None for s in self.stages)


@dataclasses.dataclass(frozen=True)
class Restarts:
    """What a finite dataset's restarts cost per epoch, in examples the pipeline refills.

    Attributes:
        epoch_examples: examples in one real epoch.
        refill_examples: examples the restarting stage (a shuffle buffer) takes in before the
            first step of an epoch gets its batch.
    """

    epoch_examples: float
    refill_examples: float

    def factor(self, steady: float, model_rate: float | None, buffer_scale: float = 1.0) -> float:
        """The share of the steady rate left after each epoch's refill.

        While the buffer refills the model idles; at the epoch's end the buffer drains
        without waiting for input. So the epoch costs `E / steady` plus the refill at the
        faster of the two sides: the input's steady rate when the model is faster (the drain
        gives back most of the fill), the model's when input is faster. `buffer_scale` scales
        the refilled buffer (a smaller shuffle buffer refills less).

        Example:
            >>> Restarts(epoch_examples=2048, refill_examples=2048).factor(1000.0, None, 0.25)
            0.8
        """
        refill = max(self.refill_examples * buffer_scale, 0.0)
        faster = max(steady, model_rate or 0.0)
        if steady <= 0 or faster <= 0:
            return 1.0
        return self.epoch_examples / (self.epoch_examples + refill * steady / faster)


@dataclasses.dataclass(frozen=True)
class InputCpu:
    """The input's CPU seconds per example, and the pipeline-only rate it was measured at."""

    s_per_example: float
    examples_per_sec: float


def pipeline_model(
    report: StageReport,
    cores: int,
    compute_examples_per_sec: float | None,
    model_cpu_s_per_example: float | None = None,
    parallelism_of: dict[int, int] | None = None,
    restarts: Restarts | None = None,
    buffer_scale: float = 1.0,
    input_cpu: InputCpu | None = None,
    measured: Mapping[str, float] | None = None,
) -> PipelineModel | None:
    """The model of a pipeline from its stage analysis; None when nothing could be measured.

    `input_cpu`, when given, replaces the full pipeline's CPU per example of the stage analysis
    in the CPU roofline: a figure measured at a higher rate (`nearest_limit_input_cpu`).
    `measured`: rates measured for configurations of the pipeline, by what measured them; the
    limit is never below them (`revise_limit`), and the threads are sized for it.

    Example:
        >>> model = pipeline_model(report, 2, 9000.0)  # doctest: +SKIP
        >>> model.threads["num_parallel_calls"], model.limit.bound_by  # doctest: +SKIP
        (18, <LimitBound.COMPUTE: 'compute'>)
    """
    costs = stage_costs(report, parallelism_of)
    if input_cpu is not None:
        input_cpu_s: float | None = input_cpu.s_per_example
        measured_at: float | None = input_cpu.examples_per_sec
    else:
        output = _last_measured(report.stages)
        input_cpu_s = output.cpu_s_per_example if output is not None else None
        measured_at = None
    limit = pipeline_limit(
        costs, cores, compute_examples_per_sec, input_cpu_s, model_cpu_s_per_example, measured_at
    )
    if limit is None:
        return None
    limit = revise_limit(limit, *split_rates(measured or {}))
    target = limit.examples_per_sec
    waiting_target = _waiting_target(limit)
    sized = [
        dataclasses.replace(
            s,
            threads=_threads(s, waiting_target if s.blocking else target, cores),
        )
        for s in costs
    ]
    threads: dict[str, int] = {}
    for stage in sized:
        if stage.tuned_argument is not None:
            argument = stage.tuned_argument
            threads[argument] = max(threads.get(argument, 1), stage.threads)
    pool = _pool_threads(sized, cores)
    steady = min(
        [target] + [s.threads / s.wall_s_per_example for s in sized if s.tuned_argument is not None]
    )
    factor = restarts.factor(steady, compute_examples_per_sec, buffer_scale) if restarts else 1.0
    if model_cpu_s_per_example is None and compute_examples_per_sec:
        # Unsampled: the model alone keeps every core busy at its compute-only rate.
        model_cpu_s_per_example = cores / compute_examples_per_sec
    return PipelineModel(
        tuple(sized),
        limit,
        cores,
        threads,
        pool,
        steady * factor,
        factor,
        model_cpu_s_per_example,
        input_cpu_s,
    )


def model_from_profile(
    profile: ProfileResult,
    cores: int,
    training: TrainingRate | None = None,
    buffer_scale: float = 1.0,
    input_cpu: InputCpu | None = None,
) -> PipelineModel | None:
    """The model of a profiled configuration; None without a stage analysis.

    Args:
        training: the model alone timed under another training setting: the limit and the
            thread counts are restated for it (the input's costs per example stay measured).
        buffer_scale: the restarting shuffle buffer's size over the profiled one.
        input_cpu: the input's CPU per example for the CPU roofline, measured at a higher
            rate than the stage analysis ran at (None: the analysis's own).
    """
    if profile.stages is None:
        return None
    measured: dict[str, float] = {}
    if training is not None:
        compute: float | None = training.examples_per_sec
        model_cpu = training.model_cpu_s_per_example
    else:
        compute = profile.compute_only.examples_per_sec if profile.compute_only else None
        model_cpu = model_cpu_s_per_example(profile)
        # Rates measured under another training setting do not bound this one's limit.
        measured = measured_rates(profile)
    return pipeline_model(
        profile.stages,
        cores,
        compute,
        model_cpu,
        autotuned_parallelism(profile.autotune),
        profile_restarts(profile),
        buffer_scale,
        input_cpu,
        measured,
    )


def profile_restarts(profile: ProfileResult) -> Restarts | None:
    """The restart cost of a profiled finite dataset in examples; None when it had none.

    A restart's measured wait (beyond the steady one) is the time the pipeline took to refill;
    at the pipeline-alone rate that is the examples refilled.
    """
    cost, phase = profile.restarts, profile.end_to_end
    if cost is None or cost.seconds_per_restart <= 0 or phase.steps <= 0:
        return None
    upstream = profile.pipeline_only.examples_per_sec if profile.pipeline_only else 0.0
    upstream = upstream or phase.examples_per_sec
    epoch_examples = cost.epoch_steps * phase.examples / phase.steps
    return Restarts(epoch_examples, cost.seconds_per_restart * upstream)


def profile_limit(profile: ProfileResult) -> Limit | None:
    """The limit of a profiled pipeline on the machine it ran on (None without stages)."""
    model = model_from_profile(profile, profile.environment.cpu_count)
    return model.limit if model is not None else None


def model_cpu_s_per_example(profile: ProfileResult) -> float | None:
    """CPU seconds the model spends per example: CPU samples over the compute-only window.

    None when the host probe did not sample inside that window (a short phase), in which case
    the CPU roofline counts the input's CPU alone.
    """
    return _phase_cpu_s_per_example(profile.compute_only, profile)


def input_cpu_s_per_example(profile: ProfileResult) -> float | None:
    """CPU seconds the input pipeline spends per example: CPU samples over the pipeline-only
    window (the pipeline iterated with no model) at that phase's rate; None without samples.
    """
    return _phase_cpu_s_per_example(profile.pipeline_only, profile)


def nearest_limit_input_cpu(
    baseline: ProfileResult, others: Sequence[ProfileResult]
) -> InputCpu | None:
    """The input's CPU per example measured at the highest rate, when that is not the baseline's.

    A pipeline's CPU per example falls as its rate rises: part of it is paid per wake-up (a
    thread woken for each element that arrives alone, pools that spin before they sleep), and
    it spreads over more elements as they queue up (docs/limit.md, "The refit"). The
    baseline's figure, measured at its own (often slow) rate, overstates what a fast
    configuration spends, and the CPU roofline built on it understates the limit. The figure
    that holds near the limit is the one measured nearest it: the pipeline-only phase of the
    fastest of `others` (configurations measured after the baseline), used only when that
    phase ran faster than the baseline's own.

    Returns None (the baseline's stage analysis stands) when none ran faster or none has CPU
    samples in its pipeline-only window.
    """
    own = baseline.pipeline_only.examples_per_sec if baseline.pipeline_only else 0.0
    faster = [
        InputCpu(cpu, p.pipeline_only.examples_per_sec)
        for p in others
        if p.pipeline_only is not None
        and p.pipeline_only.examples_per_sec > own
        and (cpu := input_cpu_s_per_example(p)) is not None
    ]
    return max(faster, key=lambda m: m.examples_per_sec, default=None)


def _phase_cpu_s_per_example(phase: PhaseResult | None, profile: ProfileResult) -> float | None:
    cpu = profile.cpu
    if phase is None or cpu is None or not phase.records or phase.examples_per_sec <= 0:
        return None
    start = phase.records[0].start_s
    end = phase.records[-1].start_s + phase.records[-1].step_s
    inside = [sample.value for sample in cpu.samples if start <= sample.t_s <= end]
    if not inside:
        return None
    busy_cores = sum(inside) / len(inside) / 100
    return busy_cores / phase.examples_per_sec


def _waiting_target(limit: Limit) -> float:
    """The rate a blocking stage is sized for: the limit, with headroom over its measured terms.

    A blocking stage's threads mostly wait, so the cores do not bound how many it needs; and
    the roofline rests on CPU measured while each part ran alone, which counts the runtime's
    idle threads spinning, so it is low more often than high. A sequential stage's rate is
    measured alone too, and Little's law on the mean wall time under-feeds it: in a
    deterministic map a slow element holds back the ones behind it, and a Python call's wall
    time stretches on busy cores. So the waiting threads are sized for the smallest of the
    compute-only rate and `ModelPolicy.blocking_headroom` times the roofline and each sequential
    stage: a few idle threads when those bind as stated, and none of the hundreds that sizing for a
    fast model alone would ask for, threads that contend for the host (and for the GIL, when
    the stage calls Python) without delivering more.
    """
    rates = [
        t.examples_per_sec * (1.0 if t.bound_by is LimitBound.COMPUTE else POLICY.blocking_headroom)
        for t in limit.terms
    ]
    return min(rates, default=limit.examples_per_sec)


def _threads(stage: StageCost, target: float, cores: int) -> int:
    """Little's law: threads in flight = rate x time each spends.

    A computing stage gets all the calls the cores can hold (`ModelPolicy.calls_per_core x cores`),
    whatever its share of the input's CPU: calls beyond the cores queue, and the queue absorbs
    the spread of per-element costs. Sized by its share instead, a cheap stage got fewer calls
    and ran slower. More calls than the cores hold can run faster still (the stage analysis,
    one call per stage, cannot see that); the search's range reaches them when the best trial
    sits on its edge.
    """
    if stage.tuned_argument is None:
        return 1
    if not stage.blocking:
        return min(POLICY.calls_per_core * max(1, cores), POLICY.thread_cap)
    needed = max(1, math.ceil(target * stage.wall_s_per_example - 1e-9))
    return min(needed, POLICY.thread_cap)


def _pool_threads(stages: Sequence[StageCost], cores: int) -> int:
    """The private pool's threads: every blocking stage's own, plus the cores' calls once.

    A blocking stage's threads wait, so each needs its own. Computing stages share the
    cores: the calls those hold (`ModelPolicy.calls_per_core x cores`) are counted once, however
    many stages compute. Counted per stage, two computing stages would ask for a pool twice the
    calls the cores hold, and pools that large run slower: the input's threads then contend
    with the model's step for the same cores.
    """
    parallel = [s for s in stages if s.tuned_argument is not None]
    waiting = sum(s.threads for s in parallel if s.blocking)
    computing = (
        POLICY.calls_per_core * max(1, cores) if any(not s.blocking for s in parallel) else 0
    )
    return min(POLICY.thread_cap, waiting + computing) or 1


def _last_measured(stats: Sequence[StageStat]) -> StageStat | None:
    measured = [s for s in stats if s.cpu_s_per_example is not None]
    return measured[-1] if measured else None
