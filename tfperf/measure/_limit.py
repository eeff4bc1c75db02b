"""The limit: the best a pipeline can do under tuning, from its stage costs.

It is the smallest of the compute-only rate (input free), the CPU roofline (usable cores ÷
(input + model CPU-seconds per example)), each stage tuning can parallelise at its tuned rate
(`ModelPolicy.parallelisable`, even one written sequential) and the rate of each run of stages
that cannot run in parallel, which one thread works through in turn (after an asynchronous
stage, only where the cut after them slows beyond the noise, `ModelPolicy.resolvable_share`).
See docs/limit.md for the derivation and a worked example.
"""

from __future__ import annotations

from collections.abc import Sequence

from tfperf.measure._costs import StageCost
from tfperf.measure._policy import POLICY
from tfperf.results import Limit, LimitBound, LimitTerm


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
    per example`; a stage that waits is held by the threads it may get, `thread_cap ÷ its wall
    time per example` (`ModelPolicy`). The smaller binds. The term is what tuning can reach, not the
    rate as written: a map written without `num_parallel_calls` is priced here too. A term at
    or above the CPU roofline (`roofline`) is left out: the roofline counts the stage's CPU
    with the rest, so it binds first. A stage's CPU is at most the whole input's
    (`input_cpu`), which may be a figure measured nearer the limit (`nearest_limit_input_cpu`).
    """
    terms = []
    for stage in stages:
        if not stage.parallelisable or stage.wall_s_per_example <= 0:
            continue
        cap = POLICY.thread_cap
        by_threads = cap / stage.wall_s_per_example
        rate, detail = by_threads, f"{cap} threads ÷ {_ms(stage.wall_s_per_example)} wall"
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


def _sequential_terms(stages: Sequence[StageCost]) -> list[LimitTerm]:
    """One term per run of sequential stages that one thread works through in turn.

    Consecutive sequential stages run in one thread, so their costs add up: a 1 ms source and
    a 0.5 ms map after it deliver 667 examples/s, not 1,000. A run that starts the pipeline
    takes the time its stages add. A run after an asynchronous stage (`upstream_s_per_example`)
    works beside it, so it binds only where the cut after it is slower than upstream by at
    least `ModelPolicy.resolvable_share`, and then at that cut's rate; below that it keeps up
    and states no term.
    """
    total_wall = sum(stage.wall_s_per_example for stage in stages) or 1.0
    terms = []
    for run in _sequential_runs(stages):
        own = sum(stage.wall_s_per_example for stage in run)
        upstream = run[0].upstream_s_per_example
        if own < POLICY.negligible_share * total_wall or own < POLICY.resolvable_share * upstream:
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
    and prefetches are never counted in a run (`ModelPolicy.never_sequential`); a shuffle does
    not end one.
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
        if not stage.parallelisable and stage.kind not in POLICY.never_sequential:
            current.append(stage)
    if current:
        runs.append(current)
    return runs


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
