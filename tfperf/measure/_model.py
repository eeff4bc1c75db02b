"""A model of the pipeline from what the profiler measured: per-stage costs, the limit, threads.

Pure functions over plain records (a `StageReport`, the compute-only rate, the core count): no
clock and no TensorFlow, so tests feed hand-built figures and assert exact numbers.

Per stage, the stage analysis gives the wall time and the CPU time it adds per example, at the
parallelism the profiled configuration ran it with. One thread of the stage then spends
`wall = added wall x parallelism` per example, of which `cpu = added CPU` computes; the rest
blocks (a read from remote storage, a sleep, a remote call). From that:

- the limit (`pipeline_limit`): the best the pipeline can do under tuning, the smallest of
  the compute-only rate (input free), the CPU roofline (usable cores ÷ (input + model
  CPU-seconds per example)), each stage tuning can parallelise at its tuned rate
  (`PARALLELISABLE`, even one written sequential) and the rate of each run of stages that
  cannot run in parallel, which one thread works through in turn (after an asynchronous
  stage, only where the cut after them slows beyond the noise, `RESOLVABLE_SHARE`); the
  input's CPU per example is the stage analysis's, or one measured at a higher rate
  (`nearest_limit_input_cpu`: it falls as the rate rises). No measured rate may exceed it:
  `revise_limit` raises it to the fastest measured, and says so;
- the threads a stage needs (Little's law): `threads = target rate x wall per example`, the
  target being the limit: more threads cannot make the stage deliver more than the rest allows;
  a computing stage gets all the calls the cores hold (`CALLS_PER_CORE` per core); a blocking
  stage's threads wait rather than compute, so its target allows `BLOCKING_HEADROOM` times the
  CPU roofline (which errs low) and times a sequential stage's rate (measured alone, while a
  slow element of a deterministic map holds back the ones behind it), and no more: idle
  threads past it only contend;
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

from tfperf.results import (
    RATE_NOISE,
    Limit,
    LimitBound,
    LimitTerm,
    PhaseResult,
    ProfileResult,
    TrainingRate,
)
from tfperf.results.stages import AutotuneReadout, StageKind, StageReport, StageStat

__all__ = [
    "BLOCKING_HEADROOM",
    "BLOCKING_RATIO",
    "CALLS_PER_CORE",
    "LIMIT_NOISE",
    "PARALLELISABLE",
    "PIPELINE_ONLY",
    "POOL_TOLERANCE",
    "RESOLVABLE_SHARE",
    "STAGE_ANALYSIS",
    "THREAD_CAP",
    "InputCpu",
    "PipelineModel",
    "Restarts",
    "StageCost",
    "input_cpu_s_per_example",
    "measured_rates",
    "model_from_profile",
    "nearest_limit_input_cpu",
    "pipeline_limit",
    "pipeline_model",
    "profile_limit",
    "profile_restarts",
    "revise_limit",
    "stage_costs",
]

#: A stage blocks when one thread's wall time per example exceeds its CPU time this many times.
BLOCKING_RATIO = 2.0
#: Most threads tfperf proposes for one stage or pool: each tf.data thread holds a stack and an
#: element in flight, and past a few hundred the scheduler, not the work, sets the pace.
THREAD_CAP = 256
#: A blocking stage is sized for at most this many times the CPU roofline's rate: the roofline
#: errs low (it counts the runtime's idle threads spinning), and past it the extra threads only
#: wait, and contend (for the GIL, when the stage calls Python). It applies to a sequential
#: stage's rate too: that rate is measured alone, and Little's law on the mean wall time
#: under-feeds it (a slow element holds back the ones behind it). See docs/limit.md.
BLOCKING_HEADROOM = 2.0
#: A computing stage keeps up to this many calls in flight per core: calls queued behind the
#: running ones absorb the spread of per-element costs.
CALLS_PER_CORE = 2
#: A private pool may hold the input this near its predicted rate: a pool's cores cap the input
#: at `cores ÷ its CPU per example`, and a cap within the model's error of the prediction costs
#: nothing the model can tell, while each core more lets the input's threads contend with the
#: step. 10% is inside the model's own error on its estimates, and a pool that caps the input
#: further below the prediction runs at its cap.
POOL_TOLERANCE = 0.9
#: A stage adding less than this share of the pipeline's time per example is left alone.
NEGLIGIBLE_SHARE = 0.02
#: Sequential stages after an asynchronous one (a parallel map or read, a prefetch) run
#: beside it, not after it: the pipeline cut after them is slower than the cut before them
#: only when they cost more than upstream delivers. They bind when the cut slows by at least
#: this share; below it the difference is the stage analysis's noise, and all it says is that
#: they keep up. Set well above that noise (a few percent between two cuts) because the error
#: is lopsided: read as a bound, a noisy cut would cap the limit near the baseline's own rate
#: and size every stage for it.
RESOLVABLE_SHARE = 0.25
#: Arguments that run a stage's work on several threads.
PARALLEL_ARGUMENTS = ("num_parallel_calls", "num_parallel_reads", "cycle_length")
#: tf.data methods that take a parallelism argument, so tuning can run them in parallel
#: whether or not the pipeline passes one: such a stage is priced at its tuned rate, never as
#: a sequential bound. A batch copies its elements on several threads with
#: `num_parallel_calls`; `padded_batch`, `filter`, `unbatch` and a generator cannot.
PARALLELISABLE = frozenset(
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
#: A measured rate this near the limit (above or below) cannot tell whether the pipeline is at
#: it: the noise between repeated windows of one configuration (`RATE_NOISE`).
LIMIT_NOISE = RATE_NOISE
#: Arguments that run a stage on threads of its own, apart from its consumer (a sequential
#: interleave takes `cycle_length` alone and runs in its consumer's thread).
_ASYNC_ARGUMENTS = ("num_parallel_calls", "num_parallel_reads")
_AUTOTUNE = -1
#: Stages never counted as a sequential bound. A shuffle's own work per element is a draw and
#: a copy; what the stage analysis adds for it is the refill after each restart, which the
#: restart term accounts for. A prefetch hands finished elements from its background thread to
#: the consumer; what the analysis adds for it is the time upstream showing through.
_NEVER_SEQUENTIAL = frozenset({StageKind.SHUFFLE, StageKind.PREFETCH})


@dataclasses.dataclass(frozen=True)
class StageCost:
    """What one stage costs per example, for one thread of it.

    Attributes:
        index, label, kind: the stage, as in its `StageStat`.
        argument: the parallelism argument the stage takes (`num_parallel_calls`, ...), or
            None for a stage that runs sequentially.
        parallelism: threads it ran with when measured (AUTOTUNE resolved where read).
        wall_s_per_example: wall seconds one thread spends per example.
        cpu_s_per_example: CPU seconds it spends per example.
        threads: Little's-law threads to sustain the model's target rate (1 when sequential).
        calls_python: its function runs Python per element.
        upstream_s_per_example: seconds per example of the pipeline cut after the nearest
            asynchronous stage before this one (a parallel map or read, a prefetch), which runs
            beside it on threads of its own; 0.0 when none precedes it.
        parallelisable: tuning can run it in parallel (`PARALLELISABLE`, or it takes a
            parallelism argument), even where the pipeline runs it sequentially.
    """

    index: int
    label: str
    kind: StageKind
    argument: str | None
    parallelism: int
    wall_s_per_example: float
    cpu_s_per_example: float
    threads: int = 1
    calls_python: bool = False
    upstream_s_per_example: float = 0.0
    parallelisable: bool = False

    @property
    def blocking(self) -> bool:
        """Whether the stage mostly waits (I/O, sleeps) rather than computes."""
        return self.wall_s_per_example > BLOCKING_RATIO * max(self.cpu_s_per_example, 0.0)


@dataclasses.dataclass(frozen=True)
class PipelineModel:
    """The model of one pipeline on one machine: stage costs, the limit and the thread counts.

    `threads` maps a parallelism argument (`num_parallel_calls`, ...) to the threads the
    stages it drives need (the most over them); `pool_threads` is what a private pool needs
    for them all (`_pool_threads`), for `private_threadpool_size`;
    `predicted_examples_per_sec` is what the model expects from those thread counts (the
    limit unless `THREAD_CAP` stops a stage short of it).
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
        """The fewest whole cores whose pool holds the input within `POOL_TOLERANCE` of the
        predicted rate (`pool_cap`), between one and the machine's; None when the input's CPU
        per example is unknown.

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
        return min(self.cores, max(1, math.ceil(POOL_TOLERANCE * needed - 1e-9)))

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
        """Whether a parallel stage mostly waits (its elements arrive in bursts)."""
        return any(s.blocking and s.argument is not None for s in self.stages)


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


def stage_costs(
    report: StageReport, parallelism_of: dict[int, int] | None = None
) -> list[StageCost]:
    """One `StageCost` per stage that adds time per example and could be measured.

    Args:
        report: the stage analysis of the profiled configuration.
        parallelism_of: stage index -> threads it ran with, for stages set to AUTOTUNE
            (from the AUTOTUNE read-out); missing ones count as one thread.
    """
    costs = []
    upstream = 0.0
    for stat in report.stages:
        added, cpu = stat.added_s_per_example, stat.added_cpu_s_per_example
        argument = _parallel_argument(stat)
        if added is not None and added > 0:
            threads = _measured_parallelism(stat, argument, parallelism_of or {})
            costs.append(
                StageCost(
                    index=stat.index,
                    label=stat.label,
                    kind=stat.kind,
                    argument=argument,
                    parallelism=threads,
                    wall_s_per_example=added * threads,
                    cpu_s_per_example=max(cpu or 0.0, 0.0),
                    calls_python=stat.calls_python,
                    upstream_s_per_example=upstream,
                    parallelisable=argument is not None or _method(stat.label) in PARALLELISABLE,
                )
            )
        if _asynchronous(stat) and stat.examples_per_sec:
            upstream = 1 / stat.examples_per_sec
    return costs


def pipeline_limit(
    stages: Sequence[StageCost],
    cores: int,
    compute_examples_per_sec: float | None,
    input_cpu_s_per_example: float | None,
    model_cpu_s_per_example: float | None,
    input_measured_at: float | None = None,
) -> Limit | None:
    """The smallest of the compute-only rate, the CPU roofline and each sequential stage's rate.

    `input_measured_at`: the pipeline-only rate the input's CPU figure was measured at, said
    in the roofline's arithmetic when it is not the stage analysis's own.
    Returns None when no term could be computed (nothing was measured).
    """
    terms: list[LimitTerm] = []
    if compute_examples_per_sec is not None and compute_examples_per_sec > 0:
        terms.append(
            LimitTerm(
                LimitBound.COMPUTE,
                compute_examples_per_sec,
                f"the model alone, on a cached batch: {compute_examples_per_sec:,.0f} examples/s",
            )
        )
    cpu = (input_cpu_s_per_example or 0.0) + (model_cpu_s_per_example or 0.0)
    if cpu > 0:
        model_part = f" + {_ms(model_cpu_s_per_example)} model" if model_cpu_s_per_example else ""
        terms.append(
            LimitTerm(
                LimitBound.CPU,
                cores / cpu,
                f"{cores} usable cores ÷ ({_ms(input_cpu_s_per_example or 0.0)} input"
                f"{model_part} CPU per example{_measured_at(input_measured_at)})",
            )
        )
    roofline = next((t.examples_per_sec for t in terms if t.bound_by is LimitBound.CPU), None)
    terms.extend(_parallel_terms(stages, cores, roofline, input_cpu_s_per_example))
    terms.extend(_sequential_terms(stages))
    if not terms:
        return None
    binding = min(terms, key=lambda term: term.examples_per_sec)
    python = next((s.label for s in stages if s.calls_python and s.parallelisable), None)
    explanation = _explain(binding) + _python_caveat(python)
    return Limit(binding.examples_per_sec, binding.bound_by, explanation, terms, python)


def _parallel_terms(
    stages: Sequence[StageCost], cores: int, roofline: float | None, input_cpu: float | None
) -> list[LimitTerm]:
    """One term per stage tuning can parallelise: its rate at its best parallelism.

    A computing stage's calls share the usable cores, so at best it delivers `cores ÷ its CPU
    per example`; a stage that waits is held by the threads it may get, `THREAD_CAP ÷ its
    wall time per example`. The smaller binds. The term is what tuning can reach, not the
    rate as written: a map written without `num_parallel_calls` is priced here too. A term at
    or above the CPU roofline (`roofline`) is left out: the roofline counts the stage's CPU
    with the rest, so it binds first. A stage's CPU is at most the whole input's
    (`input_cpu`), which may be a figure measured nearer the limit (`nearest_limit_input_cpu`).
    """
    terms = []
    for stage in stages:
        if not stage.parallelisable or stage.wall_s_per_example <= 0:
            continue
        by_threads = THREAD_CAP / stage.wall_s_per_example
        rate, detail = by_threads, f"{THREAD_CAP} threads ÷ {_ms(stage.wall_s_per_example)} wall"
        cpu = min(stage.cpu_s_per_example, input_cpu or stage.cpu_s_per_example)
        if cpu > 0 and cores / cpu < by_threads:
            rate, detail = cores / cpu, f"{cores} usable cores ÷ {_ms(cpu)} CPU"
        if roofline is not None and rate >= roofline:
            continue
        terms.append(
            LimitTerm(
                LimitBound.PARALLEL_STAGE,
                rate,
                f"{detail} per example",
                stage_label=stage.label,
            )
        )
    return terms


def revise_limit(
    limit: Limit,
    measured: Mapping[str, float],
    input_measured: Mapping[str, float] | None = None,
) -> Limit:
    """`limit`, never below a rate measured for a configuration of the pipeline.

    Args:
        measured: what measured a training rate ("end to end", "trial 7") -> that rate. One
            above the limit proves the model low: the limit becomes that rate.
        input_measured: what measured the input alone ("pipeline only") -> that rate. It
            bounds only the input's own terms (a stage's, sequential or parallel): the input
            alone may run faster than the model's step or the cores it shares with the
            model let training go, and that is no contradiction. A term below it is replaced
            by it; where it stays above the limit, `Limit.input_alone_examples_per_sec`
            keeps it and the Limit line states it and why (`Limit.bound_words`).

    A revised limit is bound by MEASURED: its explanation names the term that erred and by how
    much, and the model's figure is kept in `model_examples_per_sec`, never shown beside the
    larger one. Within `LIMIT_NOISE` of the limit, either way, tfperf cannot tell whether the
    pipeline is already at it, and the explanation says so.

    Example:
        >>> term = LimitTerm(LimitBound.CPU, 1000.0, "2 usable cores ÷ 2 ms CPU per example")
        >>> limit = Limit(1000.0, LimitBound.CPU, "The host's cores bound it.", [term])
        >>> revised = revise_limit(limit, {"end to end": 1200.0})
        >>> revised.examples_per_sec, revised.bound_by.value, revised.model_examples_per_sec
        (1200.0, 'measured', 1000.0)
    """
    model = limit.model_examples_per_sec or min(
        (t.examples_per_sec for t in limit.terms if t.bound_by is not LimitBound.MEASURED),
        default=limit.examples_per_sec,
    )
    current = limit
    for label, rate in _fastest(input_measured or {}):
        below = [
            t for t in limit.terms if t.bound_by in _INPUT_BOUNDS and t.examples_per_sec < rate
        ]
        if below:
            kept = [t for t in limit.terms if t not in below]
            terms = [*kept, LimitTerm(LimitBound.MEASURED, rate, f"measured: {label}")]
            current = _bound(limit, terms, model, min(below, key=lambda t: t.examples_per_sec))
    for label, rate in _fastest(measured):
        if rate > current.examples_per_sec:
            erring = min(
                (t for t in current.terms if t.bound_by is not LimitBound.MEASURED),
                key=lambda t: t.examples_per_sec,
                default=None,
            )
            current = dataclasses.replace(
                current,
                examples_per_sec=rate,
                bound_by=LimitBound.MEASURED,
                explanation=_revised(label, rate, model, erring),
                terms=[*current.terms, LimitTerm(LimitBound.MEASURED, rate, f"measured: {label}")],
                model_examples_per_sec=model,
                revised_by=label,
            )
    current = current if current.revised else _noted(current, measured)
    return _input_alone(current, input_measured)


def _input_alone(limit: Limit, input_measured: Mapping[str, float] | None) -> Limit:
    """`limit`, keeping the input-alone rate where it ran above it (`Limit.bound_words` says
    so): only a training limit (compute, cpu, a training rate measured) can be below it, since
    a stage's term below it was replaced by it. Without a new measurement, the rate kept is
    held against the limit as it now stands."""
    fastest = _fastest(input_measured or {})
    by, alone = (
        fastest[0] if fastest else (limit.input_alone_by, limit.input_alone_examples_per_sec)
    )
    if alone is None or alone <= limit.examples_per_sec:
        by, alone = None, None
    return dataclasses.replace(limit, input_alone_examples_per_sec=alone, input_alone_by=by)


def _bound(limit: Limit, terms: list[LimitTerm], model: float, erring: LimitTerm) -> Limit:
    """`limit` with `terms` in place of its own: bound by the smallest of them."""
    binding = min(terms, key=lambda term: term.examples_per_sec)
    if binding.bound_by is not LimitBound.MEASURED:
        return dataclasses.replace(
            limit,
            examples_per_sec=binding.examples_per_sec,
            bound_by=binding.bound_by,
            explanation=_explain(binding) + _python_caveat(limit.python_stage),
            terms=terms,
        )
    label = binding.detail.removeprefix("measured: ")
    return dataclasses.replace(
        limit,
        examples_per_sec=binding.examples_per_sec,
        bound_by=LimitBound.MEASURED,
        explanation=_revised(label, binding.examples_per_sec, model, erring),
        terms=terms,
        model_examples_per_sec=model,
        revised_by=label,
    )


#: The terms that bound the input alone, which the pipeline-only rate may contradict.
_INPUT_BOUNDS = frozenset({LimitBound.SEQUENTIAL_STAGE, LimitBound.PARALLEL_STAGE})


def _fastest(rates: Mapping[str, float]) -> list[tuple[str, float]]:
    """The fastest usable rate of `rates` with its label, as a list of at most one."""
    usable = [(label, rate) for label, rate in rates.items() if rate > 0 and math.isfinite(rate)]
    return [max(usable, key=lambda item: item[1])] if usable else []


_AT_LIMIT = "The fastest rate measured"


def _noted(limit: Limit, measured: Mapping[str, float]) -> Limit:
    """`limit`, saying so where a measured rate is within the noise below it."""
    for label, rate in _fastest(measured):
        if rate >= (1 - LIMIT_NOISE) * limit.examples_per_sec and _AT_LIMIT not in (
            limit.explanation
        ):
            return dataclasses.replace(
                limit,
                explanation=(
                    f"{limit.explanation} {_AT_LIMIT} ({label}, {rate:,.0f} examples/s) is "
                    f"within the noise of this limit ({LIMIT_NOISE:.0%}): tfperf cannot tell "
                    "whether the pipeline is already at it, so tuning may gain nothing "
                    "measurable."
                ),
            )
    return limit


def _revised(label: str, rate: float, model: float, term: LimitTerm | None) -> str:
    """Why the limit is a measured rate: which term the measurement contradicts."""
    erred = f"its {term.bound_by.value} term ({term.detail})" if term else "its terms"
    head = f"Revised to the measured {rate:,.0f} examples/s ({label})"
    if rate <= (1 + LIMIT_NOISE) * model:
        return (
            f"{head}: the model's limit ({model:,.0f}, from {erred}) is within the noise "
            f"({LIMIT_NOISE:.0%}) below it, so tfperf cannot tell whether the pipeline is "
            "already at its limit; tuning may gain nothing measurable."
        )
    return (
        f"{head}: a measured rate is one the pipeline reaches, and {erred} put the limit "
        f"{rate / model - 1:.0%} lower, so that term errs low on this pipeline and the limit "
        "is at least what was measured."
    )


def _sequential_terms(stages: Sequence[StageCost]) -> list[LimitTerm]:
    """One term per run of sequential stages that one thread works through in turn.

    Consecutive sequential stages run in one thread, so their costs add up: a 1 ms source and
    a 0.5 ms map after it deliver 667 examples/s, not 1,000. A run that starts the pipeline
    takes the time its stages add. A run after an asynchronous stage (`upstream_s_per_example`)
    works beside it, so it binds only where the cut after it is slower than upstream by at
    least `RESOLVABLE_SHARE`, and then at that cut's rate; below that it keeps up and states
    no term.
    """
    total_wall = sum(stage.wall_s_per_example for stage in stages) or 1.0
    terms = []
    for run in _sequential_runs(stages):
        own = sum(stage.wall_s_per_example for stage in run)
        upstream = run[0].upstream_s_per_example
        if own < NEGLIGIBLE_SHARE * total_wall or own < RESOLVABLE_SHARE * upstream:
            continue
        seconds = upstream + own
        costliest = max(run, key=lambda stage: stage.wall_s_per_example)
        labels = " -> ".join(stage.label for stage in run)
        after = f", beside the threads before it ({_ms(upstream)})" if upstream else ""
        verb = "runs" if len(run) == 1 else "run"
        terms.append(
            LimitTerm(
                LimitBound.SEQUENTIAL_STAGE,
                1 / seconds,
                f"{labels} {verb} on one thread{after}: {_ms(seconds)} per example",
                stage_label=costliest.label,
            )
        )
    return terms


def _sequential_runs(stages: Sequence[StageCost]) -> list[list[StageCost]]:
    """The sequential stages, grouped into runs that share one thread.

    A stage tuning can parallelise ends a run and is never in one, even one written
    sequential: tuning gives it threads of its own; so does a change of the asynchronous stage
    upstream (a prefetch, even one that added no time and so is not among the costs). Shuffles
    and prefetches are never counted in a run (`_NEVER_SEQUENTIAL`); a shuffle does not end one.
    """
    runs: list[list[StageCost]] = []
    current: list[StageCost] = []
    for stage in stages:
        ends = stage.parallelisable or (
            current and stage.upstream_s_per_example != current[0].upstream_s_per_example
        )
        if ends and current:
            runs.append(current)
            current = []
        if not stage.parallelisable and stage.kind not in _NEVER_SEQUENTIAL:
            current.append(stage)
    if current:
        runs.append(current)
    return runs


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
    limit = revise_limit(limit, *_split(measured or {}))
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
        if stage.argument is not None:
            threads[stage.argument] = max(threads.get(stage.argument, 1), stage.threads)
    pool = _pool_threads(sized, cores)
    steady = min(
        [target] + [s.threads / s.wall_s_per_example for s in sized if s.argument is not None]
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


#: The label `measured_rates` gives the pipeline-alone rate: it bounds the input's terms only.
PIPELINE_ONLY = "pipeline only"
#: The label of the whole pipeline's rate in the stage analysis (its last cut, run alone): an
#: input-alone rate too, shown in the stage table, so it bounds the input's terms alike.
STAGE_ANALYSIS = "stage analysis"
_INPUT_ALONE = frozenset({PIPELINE_ONLY, STAGE_ANALYSIS})


def measured_rates(profile: ProfileResult) -> dict[str, float]:
    """The rates a profile measured for its configuration: end to end, and the input alone
    under `PIPELINE_ONLY` and `STAGE_ANALYSIS` (which `revise_limit` holds against the input's
    terms only)."""
    rates = {"end to end": profile.end_to_end.examples_per_sec}
    if profile.pipeline_only is not None:
        rates[PIPELINE_ONLY] = profile.pipeline_only.examples_per_sec
    last = profile.stages.stages[-1] if profile.stages and profile.stages.stages else None
    if last is not None and last.examples_per_sec is not None:
        rates[STAGE_ANALYSIS] = last.examples_per_sec
    return rates


def _split(measured: Mapping[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    """`measured` as (training rates, input-alone rates) for `revise_limit`."""
    training = {label: rate for label, rate in measured.items() if label not in _INPUT_ALONE}
    alone = {label: rate for label, rate in measured.items() if label in _INPUT_ALONE}
    return training, alone


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


def autotuned_parallelism(readout: AutotuneReadout | None) -> dict[int, int]:
    """Stage index -> the parallelism AUTOTUNE chose for it, where the read-out says."""
    if readout is None:
        return {}
    return {
        choice.stage_index: int(choice.value)
        for choice in readout.choices
        if choice.stage_index is not None
        and choice.argument in PARALLEL_ARGUMENTS
        and choice.value > 0
    }


def _asynchronous(stat: StageStat) -> bool:
    """Whether a stage runs on threads of its own, apart from its consumer's thread."""
    return stat.kind is StageKind.PREFETCH or any(a in stat.parameters for a in _ASYNC_ARGUMENTS)


def _method(label: str) -> str:
    """The tf.data method a stage label names: `map(parse)` -> `map`."""
    return label.split("(", 1)[0].strip()


def _parallel_argument(stat: StageStat) -> str | None:
    for argument in PARALLEL_ARGUMENTS:
        if argument in stat.parameters:
            return argument
    return None


def _measured_parallelism(stat: StageStat, argument: str | None, autotuned: dict[int, int]) -> int:
    if argument is None:
        return 1
    value = int(stat.parameters[argument])
    if value == _AUTOTUNE:
        return autotuned.get(stat.index, 1)
    return max(1, value)


def _waiting_target(limit: Limit) -> float:
    """The rate a blocking stage is sized for: the limit, with headroom over its measured terms.

    A blocking stage's threads mostly wait, so the cores do not bound how many it needs; and
    the roofline rests on CPU measured while each part ran alone, which counts the runtime's
    idle threads spinning, so it is low more often than high. A sequential stage's rate is
    measured alone too, and Little's law on the mean wall time under-feeds it: in a
    deterministic map a slow element holds back the ones behind it, and a Python call's wall
    time stretches on busy cores. So the waiting threads are sized for the smallest of the
    compute-only rate and `BLOCKING_HEADROOM` times the roofline and each sequential stage: a
    few idle threads when those bind as stated, and none of the hundreds that sizing for a
    fast model alone would ask for, threads that contend for the host (and for the GIL, when
    the stage calls Python) without delivering more.
    """
    rates = [
        t.examples_per_sec * (1.0 if t.bound_by is LimitBound.COMPUTE else BLOCKING_HEADROOM)
        for t in limit.terms
    ]
    return min(rates, default=limit.examples_per_sec)


def _threads(stage: StageCost, target: float, cores: int) -> int:
    """Little's law: threads in flight = rate x time each spends.

    A computing stage gets all the calls the cores can hold (`CALLS_PER_CORE x cores`),
    whatever its share of the input's CPU: calls beyond the cores queue, and the queue absorbs
    the spread of per-element costs. Sized by its share instead, a cheap stage got fewer calls
    and ran slower. More calls than the cores hold can run faster still (the stage analysis,
    one call per stage, cannot see that); the search's range reaches them when the best trial
    sits on its edge.
    """
    if stage.argument is None:
        return 1
    if not stage.blocking:
        return min(CALLS_PER_CORE * max(1, cores), THREAD_CAP)
    needed = max(1, math.ceil(target * stage.wall_s_per_example - 1e-9))
    return min(needed, THREAD_CAP)


def _pool_threads(stages: Sequence[StageCost], cores: int) -> int:
    """The private pool's threads: every blocking stage's own, plus the cores' calls once.

    A blocking stage's threads wait, so each needs its own. Computing stages share the
    cores: the calls those hold (`CALLS_PER_CORE x cores`) are counted once, however many
    stages compute. Counted per stage, two computing stages would ask for a pool twice the
    calls the cores hold, and pools that large run slower: the input's threads then contend
    with the model's step for the same cores.
    """
    parallel = [s for s in stages if s.argument is not None]
    waiting = sum(s.threads for s in parallel if s.blocking)
    computing = CALLS_PER_CORE * max(1, cores) if any(not s.blocking for s in parallel) else 0
    return min(THREAD_CAP, waiting + computing) or 1


def _last_measured(stats: Sequence[StageStat]) -> StageStat | None:
    measured = [s for s in stats if s.cpu_s_per_example is not None]
    return measured[-1] if measured else None


def _explain(term: LimitTerm) -> str:
    rate = f"{term.examples_per_sec:,.0f} examples/s"
    if term.bound_by is LimitBound.COMPUTE:
        return (
            f"The model's own step bounds this pipeline at {rate}: faster input cannot speed "
            "training up; a faster model step (a GPU, a larger batch, mixed precision) would."
        )
    if term.bound_by is LimitBound.CPU:
        return (
            f"The host's cores bound this pipeline at {rate} ({term.detail}): less CPU per "
            "example (cheaper decoding, cache() after the costly stages) or more cores would "
            "lift it."
        )
    if term.bound_by is LimitBound.PARALLEL_STAGE:
        return (
            f"{term.stage_label} bounds this pipeline at {rate} even at its best parallelism "
            f"({term.detail}): cheaper work per element (cache() after its costly "
            "deterministic part, or that part done offline) would lift it."
        )
    return (
        f"{term.stage_label} cannot run in parallel and bounds this pipeline at {rate}: "
        "cheaper work per element, or that work moved into a stage that runs in parallel (a "
        "map), would lift it."
    )


def _python_caveat(label: str | None) -> str:
    if label is None:
        return ""
    return (
        f" {label} calls Python, and its threads queue for the process's one interpreter "
        "lock, which this limit does not count: the input may stop short of it with cores "
        "idle. Fewer, larger Python calls (a batch per call, one request for many objects) or "
        "TensorFlow ops in its place would lift that."
    )


def _measured_at(examples_per_sec: float | None) -> str:
    if examples_per_sec is None:
        return ""
    return f"; the input's figure measured at {examples_per_sec:,.0f} examples/s"


def _ms(seconds: float | None) -> str:
    return f"{(seconds or 0.0) * 1e3:.3g} ms"
