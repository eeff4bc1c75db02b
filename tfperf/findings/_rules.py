"""The rules that make a profile's findings, each a small named step over one result.

Like pyinstrument's processors: `RULES` is a tuple of functions run in order, each with a
docstring saying what it states and when it stays silent; each checks its own preconditions
against the figures and the pipeline's facts and returns the findings it can back, or none.
No rule prints: the terminal, the HTML page and the JSON render what they return.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

from tfperf.findings._facts import (
    PARALLEL_ARGUMENT,
    PipelineFacts,
    fit_got_arrays,
    made_in_a_library,
)
from tfperf.findings._frozen import cycled, endless_cache, frozen_draws, frozen_order
from tfperf.findings._restart_words import restart_finding
from tfperf.findings._retracing import retracing
from tfperf.findings._stage_fixes import stage_fix
from tfperf.results import RATE_NOISE, ProfileResult, StepRecord, Verdict
from tfperf.results.findings import Evidence, Finding, Level
from tfperf.results.stages import StageKind, StageStat
from tfperf.units import format_names, format_seconds

Rule = Callable[[ProfileResult, PipelineFacts], Sequence[Finding]]

#: Compute slowdown above which input work is said to compete with training for the CPU.
CONTENTION_AT = 1.25
#: Below this compute slowdown the compute-only replay ran slower than the same batches end
#: to end, past noise: that phase was disturbed.
DISTURBED_BELOW = 0.95
#: A last cut of the stage analysis this much below the pipeline-only phase was disturbed.
STAGES_DISTURBED_SHARE = 0.25
#: Cautions rank by this weight: below the heavy fixes, above the light notes.
CAUTION_WEIGHT = 0.5


def _caution(
    rule: str,
    text: str,
    fix: str,
    evidence: Evidence,
    *,
    share: float = 1.0,
    relies_on: tuple[str, ...] = (),
    topic: str | None = None,
) -> list[Finding]:
    """A caution of `share` of the usual caution's weight."""
    weight = CAUTION_WEIGHT * share
    return [Finding(rule, Level.CAUTION, text, fix, evidence, relies_on, topic, weight=weight)]


#: Memory findings rank by this weight: memory is no share of step time, but a hazard.
MEMORY_WEIGHT = 0.15
#: The question the input-rate findings answer: how the input alone compares with the model.
#: A framework's finding on this topic, in its own words, replaces the neutral ones.
INPUT_RATES = "input-rates"


def demand(result: ProfileResult) -> float | None:
    """Examples/s the model consumes when input is free (the compute-only ceiling)."""
    if result.speedup_if_input_free is None:
        return None
    cost = result.restarts
    rate = cost.weighted_examples_per_sec if cost is not None else None
    return result.speedup_if_input_free * (rate or result.end_to_end.examples_per_sec)


def supply(result: ProfileResult) -> float | None:
    """Examples/s the input delivers alone (the pipeline-only phase), over a real epoch.

    Where the window restarts more often than a real epoch does (an epoch given longer than
    the data the window read), the model's side (`demand`) is weighed by the real epoch: so is
    this one, from the pipeline alone's steps between restarts and its own restart cost, like
    with like. Where every pass the window read was a real epoch long, the phase's own rate
    already counts one restart per epoch: it is the figure, as the profile's table shows it;
    so is it where the weighed rate lies within `RATE_NOISE` of it (one figure, not two).
    """
    alone = result.pipeline_only
    cost = result.restarts
    if alone is None or cost is None or not alone.epochs_crossed:
        return alone.examples_per_sec if alone is not None else None
    records = alone.records
    starts = _pass_starts(records)
    passes = [end - start for start, end in itertools.pairwise(starts)]
    if passes and all(steps == cost.epoch_steps for steps in passes):
        return alone.examples_per_sec
    firsts = set(starts)
    steady = [r for i, r in enumerate(records) if not r.warmup and i not in firsts]
    if not steady:
        return alone.examples_per_sec
    step_s = math.fsum(r.step_s for r in steady) / len(steady)
    per_step = step_s + (cost.pipeline_seconds_per_restart or 0.0) / cost.epoch_steps
    examples = math.fsum(r.examples for r in steady) / len(steady)
    if per_step <= 0:
        return alone.examples_per_sec
    weighed = examples / per_step
    same = abs(weighed - alone.examples_per_sec) <= RATE_NOISE * alone.examples_per_sec
    return alone.examples_per_sec if same else weighed


def _speed_up(facts: PipelineFacts) -> str:
    """How to speed up an input slower than the model: what the pipeline lacks, where its stage
    graph tells (a stage on one thread, no prefetch, no cache); else the usual three."""
    if not facts.stages:
        lacks = ["parallel map and reads", "prefetch", "caching decoded data"]
    else:
        parallel = (StageKind.MAP, StageKind.READ, StageKind.INTERLEAVE)
        one = any(s.kind in parallel and facts.threads(s) == 1 for s in facts.stages)
        lacks = [
            *(["parallel map and reads"] if one else []),
            *(["prefetch"] if facts.has_prefetch() is False else []),
            *(["caching decoded data"] if facts.cache_index is None else []),
        ]
    if not lacks:
        return "Make its costliest stage cheaper; `tfperf tune` searches its knobs."
    return f"Speed up the input ({', '.join(lacks)}); `tfperf tune` searches these knobs."


def _weighed(result: ProfileResult, alone: float) -> str:
    """Where `supply` weighed the pipeline alone by a real epoch, so its figure is not the
    table's: what it is, beside the table's; else nothing."""
    phase, cost = result.pipeline_only, result.restarts
    if phase is None or cost is None or alone == phase.examples_per_sec:
        return ""
    return (
        f" over a real epoch of {cost.epoch_steps:,} steps ({phase.examples_per_sec:,.0f} over "
        "the window, as the table shows)"
    )


def _pass_starts(records: Sequence[StepRecord]) -> list[int]:
    """The index of each record that is the first of a pass after a restart. The steps between
    two of them are a pass the window read whole (it starts and stops within others)."""
    return [i for i in range(1, len(records)) if records[i].epoch != records[i - 1].epoch]


def _phase_evidence(result: ProfileResult) -> Evidence:
    e2e = result.end_to_end
    spread = (
        f"step p50 {format_seconds(e2e.step_time.p50_s)}, p90 {format_seconds(e2e.step_time.p90_s)}"
    )
    return Evidence("end_to_end", e2e.steps, spread)


def stages_disturbed(result: ProfileResult, facts: PipelineFacts) -> list[Finding]:
    """A caution when the stage analysis's last cut ran well below the pipeline-only phase:
    the same pipeline measured twice disagrees, so no stage is named limiting."""
    last = next((s.examples_per_sec for s in reversed(facts.stages) if s.examples_per_sec), None)
    alone = supply(result)
    if last is None or not alone or last >= (1 - STAGES_DISTURBED_SHARE) * alone:
        return []
    return _caution(
        "stages-disturbed",
        f"The stage analysis's last cut ran {last:,.0f} examples/s, "
        f"{1 - last / alone:.0%} below the pipeline-only phase's {alone:,.0f} for the same "
        "pipeline: its figures were disturbed, so tfperf cannot tell which stage limits.",
        "Profile again on a quieter machine.",
        Evidence("stages", len(facts.stages), unit="stages"),
        topic="limiting-stage",
    )


def stages_unmeasured(result: ProfileResult, facts: PipelineFacts) -> list[Finding]:
    """A caution naming the stages the stage analysis did not reach: nothing is concluded
    about them."""
    missing = facts.unmeasured()
    if not missing:
        return []
    names = ", ".join(stage.label for stage in missing[:4])
    more = f" and {len(missing) - 4} more" if len(missing) > 4 else ""
    return _caution(
        "stages-unmeasured",
        f"The stage analysis did not measure {names}{more}: nothing is concluded about "
        f"{'it' if len(missing) == 1 else 'them'}.",
        "A larger --budget measures every stage.",
        Evidence("stages", len(facts.stages) - len(missing), unit="stages"),
        share=0.8,
    )


#: A cut whose rate is within this factor of the whole pipeline's already carries its limit.
CARRIES_LIMIT = 1.25


def limit_at_or_before(result: ProfileResult, facts: PipelineFacts) -> list[Finding]:
    """Where the budget left stages unmeasured and no stage is named: the earliest measured
    cut that already runs about as slowly as the whole pipeline places the limit at or before
    it, among the stages up to it; nothing is said of which of them."""
    report = result.stages
    if report is None or report.bottleneck is not None or not facts.unmeasured():
        return []
    measured = [s for s in facts.stages if s.examples_per_sec]
    if len(measured) < 2:
        return []
    output = measured[-1].examples_per_sec or 0.0
    carrier = next(s for s in measured if (s.examples_per_sec or 0.0) <= CARRIES_LIMIT * output)
    if carrier is measured[-1] or (result.verdict is Verdict.COMPUTE_BOUND):
        return []
    before = [s.label for s in facts.stages if s.index <= carrier.index]
    return _caution(
        "limit-at-or-before",
        f"The limit lies at or before {carrier.label}: the pipeline cut there already runs "
        f"{carrier.examples_per_sec:,.0f} examples/s, the whole {output:,.0f}; tfperf "
        f"cannot tell which of {', '.join(before)} it is.",
        "A larger --budget measures each of them.",
        Evidence("stages", len(measured), unit="stages"),
        relies_on=(f"{len(facts.unmeasured())} stages unmeasured",),
        share=0.9,
    )


def compute_disturbed(result: ProfileResult, facts: PipelineFacts) -> list[Finding]:
    """A caution when the model alone ran slower than beside the pipeline: that phase was
    disturbed, and the ceiling counts end to end's compute time instead."""
    slowdown = result.compute_slowdown
    if slowdown is None or slowdown >= DISTURBED_BELOW:
        return []
    return _caution(
        "compute-disturbed",
        f"The model alone took {1 / slowdown:.2f}x as long per example as end to end: the "
        "compute-only phase was disturbed, so the ceiling counts end to end's compute time.",
        "Profile again on a quieter machine, or with more --steps.",
        Evidence("compute_only", result.compute_only.steps if result.compute_only else None),
    )


def order_disturbed(result: ProfileResult, facts: PipelineFacts) -> list[Finding]:
    """A caution when end to end ran faster than the pipeline alone beyond the noise."""
    ratio = result.end_to_end_over_pipeline
    if ratio is None:
        return []
    return _caution(
        "phases-disturbed",
        f"End to end ran {ratio - 1:.0%} faster than the pipeline alone, beyond the noise "
        f"({RATE_NOISE:.0%}), though it runs the same pipeline with the model beside it: "
        "the phases ran under different conditions, so neither is the pipeline's own rate.",
        "Profile again on a quieter machine.",
        Evidence("pipeline_only", result.pipeline_only.steps if result.pipeline_only else None),
    )


def restarts(result: ProfileResult, facts: PipelineFacts) -> list[Finding]:
    """What the dataset's restarts cost, from enough restarts; "cannot tell" from fewer."""
    if result.restarts is None:
        return []
    cost = result.restarts
    stage = next((s for s in facts.stages if s.label == cost.stage), None)
    threads = facts.threads(stage) if stage is not None else None
    found = restart_finding(
        cost, loader=result.loader, threads=threads, arrays=fit_got_arrays(result)
    )
    return [found] if found is not None else []


def limiting_stage(result: ProfileResult, facts: PipelineFacts) -> list[Finding]:
    """The stage that limits the pipeline and its fix; a stage that runs only before a
    `cache()` is said to cost the first epoch alone, and nothing is said of a pipeline that
    keeps up (the costliest stage is then a note)."""
    report = result.stages
    stage = report.bottleneck if report is not None else None
    if report is None or stage is None or stage.added_s_per_example is None:
        return []
    added = f"{stage.added_s_per_example * 1000:.3g} ms"
    evidence = Evidence("stages", len(facts.stages) - len(facts.unmeasured()), unit="stages")
    where = (f"defined at {stage.location}",) if stage.location else ()
    if facts.cached_after(stage):
        return [
            Finding(
                "limiting-stage",
                Level.NOTE,
                f"{stage.label} adds {added} per example, but a cache() after it serves its "
                "output from the second epoch on: it costs the first epoch only.",
                None,
                evidence,
                relies_on=(f"cache() after {stage.label}", *where),
                topic="limiting-stage",
                weight=0.05,
            )
        ]
    if report.limiting is None:
        return [
            Finding(
                "costliest-stage",
                Level.NOTE,
                f"Run alone, the pipeline keeps up with the model; its costliest stage, "
                f"{stage.label}, adds {added} per example.",
                None,
                evidence,
                relies_on=where,
                topic="limiting-stage",
                weight=0.05,
            )
        ]
    rate = f"{stage.examples_per_sec:,.0f} examples/s after it" if stage.examples_per_sec else ""
    threads = facts.threads(stage)
    relies = (*where, _threads_fact(stage.label, threads, stage.index in facts.autotuned))
    return [
        Finding(
            "limiting-stage",
            Level.FIX,
            f"The limiting stage is {stage.label}: it adds {added} per example"
            + (f" ({rate})." if rate else "."),
            stage_fix(stage, facts) + _library_made(result, stage),
            evidence,
            relies_on=tuple(fact for fact in relies if fact),
            topic="limiting-stage",
            weight=result.input_wait_fraction,
        )
    ]


def _library_made(result: ProfileResult, stage: StageStat) -> str:
    """Where no call in the user's code made `stage`, a sentence that says so: its fix is
    made through the arguments of the library function that built it."""
    if not made_in_a_library(result, stage):
        return ""
    return (
        f" No call in your code makes {stage.label}: a library function you called built it, "
        "so change it through that function's arguments."
    )


def _threads_fact(label: str, threads: int | None, autotuned: bool) -> str:
    if threads is None:
        return ""
    how = "AUTOTUNE's read-out" if autotuned else "as written"
    return f"{label} runs on {threads} thread{'s' * (threads != 1)} ({how})"


def input_rates(result: ProfileResult, facts: PipelineFacts) -> list[Finding]:
    """Input slower than the model (speed up the input), or keeping up alone while steps
    still wait (overlap and contention); nothing when compute bounds training."""
    if result.verdict is Verdict.COMPUTE_BOUND:
        return [
            Finding(
                "compute-bound",
                Level.NOTE,
                f"Input is not the bottleneck (steps wait {result.input_wait_fraction:.0%} of "
                "the time): speed now comes from the model's own step.",
                None,
                _phase_evidence(result),
                topic=INPUT_RATES,
                weight=0.01,
            )
        ]
    alone, needed = supply(result), demand(result)
    wait = result.input_wait_fraction
    if alone is None or needed is None:
        return [
            Finding(
                "input-slower-than-model",
                Level.FIX,
                f"Steps wait for input {wait:.0%} of the time.",
                "Make the input faster; `tfperf tune` searches its knobs.",
                _phase_evidence(result),
                topic=INPUT_RATES,
                weight=wait * 0.9,
            )
        ]
    if alone < needed:
        return [
            Finding(
                "input-slower-than-model",
                Level.FIX,
                f"The input alone delivers {alone:,.0f} examples/s{_weighed(result, alone)} "
                f"but the model could consume {needed:,.0f}.",
                _speed_up(facts),
                _phase_evidence(result),
                topic=INPUT_RATES,
                weight=wait * 0.9,
            )
        ]
    prefetches = facts.has_prefetch()
    fix = "Add prefetch so input overlaps compute." if prefetches is False else ""
    relies_on: dict[bool | None, tuple[str, ...]] = {
        True: ("the pipeline prefetches",),
        False: ("no prefetch in the pipeline",),
        None: (),
    }
    return [
        Finding(
            "input-keeps-up-alone",
            Level.FIX if fix else Level.NOTE,
            f"The input alone keeps up ({alone:,.0f}{_weighed(result, alone)} vs {needed:,.0f} "
            "examples/s needed), yet "
            f"steps wait {wait:.0%} of the time: running beside the model, the two compete for "
            "the cores"
            + (", or input does not overlap compute" if prefetches is None else "")
            + ".",
            fix or None,
            _phase_evidence(result),
            relies_on=relies_on[prefetches],
            topic=INPUT_RATES,
            weight=wait * 0.9,
        )
    ]


def prefetch_zero(result: ProfileResult, facts: PipelineFacts) -> list[Finding]:
    """`prefetch` set to 0 with no prefetch stage in the pipeline, while steps wait."""
    if result.verdict is Verdict.COMPUTE_BOUND or result.knobs.get("prefetch") != 0:
        return []
    if facts.has_prefetch():
        return []
    return [
        Finding(
            "prefetch-zero",
            Level.FIX,
            "prefetch is 0 and the pipeline has no prefetch stage, so input never overlaps "
            "compute.",
            "Start with prefetch (tf.data.AUTOTUNE, or 1-2 batches).",
            _phase_evidence(result),
            relies_on=("no prefetch stage",),
            topic=INPUT_RATES,
            weight=result.input_wait_fraction * 0.95,
        )
    ]


def contention(result: ProfileResult, facts: PipelineFacts) -> list[Finding]:
    """Steps compute slower end to end than on cached batches: input work takes the cores.
    Weighed by the share of a step the slowdown costs: the computing part of a step (what
    the wait leaves) times the part of it beyond the cached batches' compute. A loader with
    worker processes says it in its own words (its framework's `contention` finding)."""
    slowdown = result.compute_slowdown
    if slowdown is None or slowdown < CONTENTION_AT or result.loader is not None:
        return []
    computing = 1 - result.input_wait_fraction
    python = [stage.label for stage in facts.stages if stage.calls_python]
    lock = (
        f", and for Python's interpreter lock ({format_names(python)} "
        f"run{'s' * (len(python) == 1)} Python per element)"
        if python
        else ""
    )
    return [
        Finding(
            "contention",
            Level.FIX,
            f"Steps compute {slowdown:.1f}x slower end to end than on cached batches: input "
            f"work competes with training for the CPU{lock}.",
            _cheaper_input(facts, python=bool(python)),
            _phase_evidence(result),
            relies_on=tuple(f"{label} calls Python (its traced function)" for label in python),
            weight=computing * (1 - 1 / slowdown),
        )
    ]


def _cheaper_input(facts: PipelineFacts, *, python: bool) -> str:
    """How input work could take less of the cores: only what the stage graph does not show
    done already (a cache, every parallel stage on one thread); without it, the usual two."""
    parallel = [s for s in facts.stages if s.kind in PARALLEL_ARGUMENT]
    ways = [
        *(["cache decoded data"] if not facts.stages or facts.cache_index is None else []),
        *(["fewer threads"] if not facts.stages or _threaded(facts, parallel) else []),
        *(["TensorFlow ops in place of Python"] if python else []),
    ]
    if not ways:
        return "Cheaper input would speed up training too."
    return f"Cheaper input ({', '.join(ways)}) would speed up training too."


def _threaded(facts: PipelineFacts, parallel: Sequence[StageStat]) -> bool:
    """Some parallel stage runs, or may run, on more than one thread."""
    return any(facts.threads(stage) != 1 for stage in parallel)


def memory(result: ProfileResult, facts: PipelineFacts) -> list[Finding]:
    """What would shrink the largest buffers, from the memory account."""
    account = result.memory
    if account is None:
        return []
    return [
        Finding(
            "memory",
            Level.FIX,
            advice,
            None,
            Evidence("memory", len(account.holds), unit="buffers"),
            weight=MEMORY_WEIGHT,
        )
        for advice in account.advice
    ]


def warmup_unsettled(result: ProfileResult, facts: PipelineFacts) -> list[Finding]:
    """A caution when step times had not settled by the end of warm-up."""
    if result.end_to_end.warmup.converged:
        return []
    return _caution(
        "warmup-unsettled",
        "Step times had not settled by the end of warm-up: the figures may include drift.",
        "Profile again with more --warmup.",
        Evidence("end_to_end", result.end_to_end.warmup.steps),
        share=0.6,
    )


#: The rules, in the order they run: cautions first, so the findings after them can be
#: checked against them.
RULES: tuple[Rule, ...] = (
    stages_disturbed,
    stages_unmeasured,
    limit_at_or_before,
    compute_disturbed,
    order_disturbed,
    warmup_unsettled,
    restarts,
    limiting_stage,
    input_rates,
    prefetch_zero,
    contention,
    retracing,
    memory,
    frozen_draws,
    frozen_order,
    endless_cache,
    cycled,
)
