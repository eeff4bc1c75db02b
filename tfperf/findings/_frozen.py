"""What a `cache()` the user wrote does beyond speed: the draws and the order it freezes, and
a cache that never completes; and a script's `itertools.cycle`, which freezes a whole pass.

A cache hands every pass after the first the elements the first pass made, in the order it
made them. Where a stage before it draws random numbers anew at each call (augmentation: a
random flip, crop or rotation), those draws are made once, and every later epoch trains on the
same augmented examples. The stage's draws are read from its traced function
(`StageStat.draws_random`); a function calling Python is opaque, and nothing is said of it.
Where a shuffle before it reshuffles each epoch and none comes after it, every epoch trains in
the first epoch's order. Where an endless `repeat()` comes before it, the cache never completes:
it keeps every element it reads, and serves none. `itertools.cycle` over a loader or a dataset
keeps the first pass's batches and replays them (`measure.served.cycled_at`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from tfperf.findings._facts import PipelineFacts
from tfperf.results import ProfileResult
from tfperf.results.findings import Evidence, Finding, Level
from tfperf.results.stages import StageKind, StageStat

#: Findings on what training sees rank by this weight: no share of step time, but a change to
#: what the model learns, above memory's hazard and below a cost of most of each step.
TRAINING_HAZARD_WEIGHT = 0.3


def frozen_draws(result: ProfileResult, facts: PipelineFacts) -> list[Finding]:
    """A `cache()` after stages that draw random numbers anew at each call: their first
    pass's draws serve every later epoch. Silent without the stage analysis's graph, and for a
    stage whose draws a cache between them already froze (the first cache's finding names it).
    """
    found: list[Finding] = []
    for _, before in _since_last_cache(facts.stages):
        drawing = [s for s in before if s.draws_random]
        if drawing:
            found.append(_frozen(drawing, result, facts))
    return found


def _since_last_cache(
    stages: Sequence[StageStat],
) -> Iterator[tuple[StageStat, list[StageStat]]]:
    """Each `cache()`, with the stages between the cache before it (or the source) and it:
    what it freezes that no earlier cache already did."""
    previous = -1
    for cache in (s for s in stages if s.kind is StageKind.CACHE):
        yield cache, [s for s in stages if previous < s.index < cache.index]
        previous = cache.index


def _frozen(drawing: Sequence[StageStat], result: ProfileResult, facts: PipelineFacts) -> Finding:
    names = " and ".join(stage.label for stage in drawing)
    ops = sorted({op for stage in drawing for op in stage.draws_random})
    one = len(drawing) == 1
    first = drawing[0]
    cost = _cost(first, result)
    return Finding(
        "frozen-draws",
        Level.FIX,
        f"The cache() after {names} keeps what the first pass made: {names} "
        f"{'draws' if one else 'draw'} random numbers ({', '.join(ops)}), so every later epoch "
        "trains on the examples the first epoch drew, not on new draws.",
        f"Put cache() before {first.label} (after the costly stages that draw nothing), so "
        f"{'it draws' if one else 'they draw'} anew each epoch; {first.label} then runs every "
        f"epoch{cost}.",
        Evidence("stages" if cost else None, len(facts.stages), unit="stages"),
        relies_on=(
            *(f"{s.label} draws {', '.join(s.draws_random)} anew at each call" for s in drawing),
            "no cache() between them and this one",
        ),
        weight=TRAINING_HAZARD_WEIGHT,
        hazard=True,
    )


def _cost(stage: StageStat, result: ProfileResult) -> str:
    """The pipeline's rate up to `stage`, beside what the model consumes, where both were
    measured: what running the stage every epoch would face."""
    consumes = result.compute_only.examples_per_sec if result.compute_only else None
    if stage.examples_per_sec is None or consumes is None:
        return ""
    return (
        f" (up to it, the pipeline ran at {stage.examples_per_sec:,.0f} examples/s alone; the "
        f"model consumes {consumes:,.0f})"
    )


def frozen_order(result: ProfileResult, facts: PipelineFacts) -> list[Finding]:
    """A `cache()` after shuffles that reshuffle each epoch, with no shuffle after it: every
    later epoch reads the first epoch's order. Silent without the stage analysis's graph, for a
    shuffle written with `reshuffle_each_iteration=False` (one order by design), and for a
    shuffle a cache between them already froze (the first cache's finding names it)."""
    stages = facts.stages
    found: list[Finding] = []
    for cache, before in _since_last_cache(stages):
        shuffles = [s for s in before if _reshuffles(s)]
        after = any(s.kind is StageKind.SHUFFLE and s.index > cache.index for s in stages)
        if shuffles and not after:
            found.append(_frozen_order(shuffles, len(stages)))
    return found


def _reshuffles(stage: StageStat) -> bool:
    return (
        stage.kind is StageKind.SHUFFLE
        and stage.parameters.get("reshuffle_each_iteration", True) is not False
    )


def _frozen_order(shuffles: Sequence[StageStat], stages: int) -> Finding:
    names = " and ".join(stage.label for stage in shuffles)
    one = len(shuffles) == 1
    return Finding(
        "frozen-order",
        Level.FIX,
        f"The cache() after {names} keeps the order the first pass drew: {names} "
        f"{'reshuffles' if one else 'reshuffle'} each epoch, but from the second epoch on the "
        "cache serves its elements in that first order, so every epoch trains in the same order.",
        "Shuffle after the cache(): `.cache().shuffle(buffer_size)` reads the cached elements "
        "in a new order every epoch.",
        Evidence(None, stages, unit="stages"),
        relies_on=(
            *(f"{s.label} reshuffles each epoch (reshuffle_each_iteration)" for s in shuffles),
            "no shuffle after this cache()",
        ),
        weight=TRAINING_HAZARD_WEIGHT,
        hazard=True,
    )


def endless_cache(result: ProfileResult, facts: PipelineFacts) -> list[Finding]:
    """A `cache()` after an endless `repeat()`, with no `take` between: it never completes, so
    it keeps every element in memory for as long as training runs and never serves one."""
    found: list[Finding] = []
    for cache in (s for s in facts.stages if s.kind is StageKind.CACHE):
        before = [s for s in facts.stages if s.index < cache.index]
        repeat = next((s for s in reversed(before) if _endless(s)), None)
        if repeat is None or any(
            s.kind is StageKind.TAKE and s.index > repeat.index for s in before
        ):
            continue
        found.append(
            Finding(
                "endless-cache",
                Level.FIX,
                f"The cache() after {repeat.label} never completes: the repeat makes the "
                "stream endless, so the cache keeps every element it reads, its memory growing "
                "for as long as training runs, and never serves one; the stages before it run "
                "every epoch.",
                "Put cache() before repeat() (`.cache().repeat()`): the first epoch fills it, "
                "and every later epoch reads it.",
                Evidence(None, len(facts.stages), unit="stages"),
                relies_on=(f"{repeat.label} repeats without end (count -1)",),
                weight=TRAINING_HAZARD_WEIGHT,
            )
        )
    return found


def cycled(result: ProfileResult, facts: PipelineFacts) -> list[Finding]:
    """A script's loop that takes its batches through `itertools.cycle` (`result.cycled`):
    after the first pass, training replays that pass's batches, and nothing is loaded. The
    figures are of fresh passes, which the served loop measured instead."""
    if result.cycled is None:
        return []
    return [
        Finding(
            "cycled",
            Level.FIX,
            f"The loop at {result.cycled} takes its batches through itertools.cycle, which "
            "keeps every batch of the first pass and replays them in the same order: after it "
            "the script loads nothing, so training sees no new shuffle or augmentation, and a "
            "whole pass of batches stays in RAM. tfperf measured each pass loaded afresh, "
            "which is what training on new passes costs.",
            "Replace the itertools.cycle call with a generator that starts a new pass when one "
            "ends (`def forever(data):` then `while True: yield from data`), so every pass is "
            "shuffled and loaded anew.",
            Evidence("code", None),
            relies_on=(f"itertools.cycle is given the data itself at {result.cycled}",),
            weight=TRAINING_HAZARD_WEIGHT,
            hazard=True,
        )
    ]


def _endless(stage: StageStat) -> bool:
    return stage.kind is StageKind.REPEAT and stage.parameters.get("count") == -1
