"""What a finite dataset's restarts cost, in words, from the measured `RestartCost`.

A restart's cost is named only from enough restarts (`RestartCost.cost_told`) whose spread is
stated; a stage is named only where it was measured late after a fresh start. Otherwise the
finding says that tfperf cannot tell, and what would tell.
"""

from __future__ import annotations

from tfperf.findings._facts import PARALLEL_ARGUMENT
from tfperf.results.findings import Evidence, Finding, Level
from tfperf.results.stages import (
    EPOCH_SOURCE_WORDS,
    EpochSource,
    LoaderReport,
    RestartCost,
    StageKind,
)
from tfperf.units import format_seconds

_REPEAT = (
    "Call repeat() on the dataset and take each epoch's steps from one iterator "
    "(steps_per_epoch in fit; next() N times in a loop of your own), so the pipeline never "
    "restarts and stays warm across epochs"
)
_KERAS_REFILLS = "the dataset Keras builds from your arrays fills again"
_ARRAYS_FIX = (
    "Build the dataset from your arrays yourself, "
    "tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x)).batch(batch_size).repeat()"
    ".prefetch(tf.data.AUTOTUNE), and pass it to fit with steps_per_epoch=len(x) // "
    "batch_size, so the pipeline never restarts and stays warm across epochs."
)


def restart_finding(
    cost: RestartCost,
    *,
    loader: LoaderReport | None = None,
    threads: int | None = 1,
    arrays: bool = False,
) -> Finding | None:
    """The finding on restarts: their cost and fix when they dominate, a note when they weigh
    little, "cannot tell" when too few were measured; None when none happened.

    `loader`: a DataLoader's report (its workers, whether it keeps them); None for a dataset.

    `threads`: the threads the stage a restart waits for ran on (AUTOTUNE's read-out, else as
    written; None when not known): only a stage on one thread is told to run in parallel.

    `arrays`: `fit` got arrays, so the dataset that restarts is the one Keras builds from them,
    and the fix is a dataset of the user's own.
    """
    samples = cost.restarts
    source = EPOCH_SOURCE_WORDS[cost.epoch_source]
    evidence = Evidence("end_to_end", samples, _spread(cost), unit="restarts")
    share = max(0.0, cost.weighted_wait_fraction - cost.steady_wait_fraction)
    if not cost.cost_told:
        tell = cost.would_tell or "cannot tell what a restart costs"
        said, _, fix = tell.partition(": ")
        return Finding(
            "restarts",
            Level.CAUTION,
            f"The {_pipeline(loader)} restarted {samples} time{'s' * (samples != 1)} in the "
            f"window{_set_apart(cost)}; tfperf {said}.",
            (fix[0].upper() + fix[1:] + ".") if fix else None,
            evidence,
            topic="restart-cause",
            weight=max(share, 0.02),
        )
    if not cost.dominates:
        restarted = f"The {_pipeline(loader)} restarted {samples} time{'s' * (samples != 1)}"
        if cost.seconds_per_restart <= 0:
            said = (
                f"{restarted} in the window, and a restart waited no longer than the steps "
                "between them: restarts cost nothing measurable here."
            )
        else:
            waiting = f" while {_KERAS_REFILLS}" if arrays else cost.waiting_on
            said = (
                f"{restarted} in the window, each waiting "
                f"{format_seconds(cost.seconds_per_restart)} longer than the steps between them"
                f"{waiting}; over a real epoch of {cost.epoch_steps:,} steps "
                f"({source}) restarts add less wait than those steps, and "
                "the figures count one per epoch."
            )
        return Finding(
            "restarts",
            Level.NOTE,
            said,
            None,
            evidence,
            weight=share,
        )
    if cost.steady_steps == 0:
        return _every_step(cost, loader, threads, evidence, share)
    return Finding(
        "restarts",
        Level.FIX,
        f"Steps wait {cost.weighted_wait_fraction:.0%} of a real epoch of "
        f"{cost.epoch_steps:,} steps ({source}), mostly at restarts: each "
        f"costs {format_seconds(cost.seconds_per_restart)} while "
        f"{_KERAS_REFILLS if arrays else _what_refills(cost)}; "
        f"between restarts steps wait {cost.steady_wait_fraction:.0%}.",
        _ARRAYS_FIX if arrays else _restart_fix(cost, loader, threads),
        evidence,
        relies_on=_relies_on(cost),
        topic="restart-cause",
        weight=share,
    )


def _every_step(
    cost: RestartCost,
    loader: LoaderReport | None,
    threads: int | None,
    evidence: Evidence,
    share: float,
) -> Finding:
    """Every measured step was the first of a pass: none waited between restarts."""
    noun, name = ("DataLoader", "loader") if loader is not None else ("dataset", "ds")
    each = format_seconds(cost.seconds_per_restart)
    if cost.epoch_source is EpochSource.LOOP and cost.epoch_steps == 1:
        said = f"the script's loop starts a new pass of the {noun} for every batch it takes"
        fix = (
            f"Make the iterator once, before the loop (`it = iter({name})`), call "
            "`next(it)` each step, and make a new one only when it runs out (StopIteration)."
        )
    else:
        batches = f"{cost.epoch_steps:,} batch{'es' * (cost.epoch_steps != 1)}"
        said = f"a pass of the {noun} holds only {batches}"
        fix = _restart_fix(cost, loader, threads)
    return Finding(
        "restarts",
        Level.FIX,
        f"Every measured step started a new pass: {said}, and each step waits {each} "
        f"for its batch, {cost.weighted_wait_fraction:.0%} of the step.",
        fix,
        evidence,
        relies_on=_relies_on(cost),
        topic="restart-cause",
        weight=share,
    )


def _set_apart(cost: RestartCost) -> str:
    """The restarts not weighed, and why: each waited far beyond any restart of the pipeline
    run alone, so the pipeline was not what it waited for; empty when none was set apart."""
    apart = len(cost.set_apart_waits_s)
    if apart == 0:
        return ""
    one = apart == 1
    return (
        f", {apart} of {'them' if not one else 'which'} set apart: "
        f"{'it' if one else 'they'} waited far longer than any restart of the pipeline alone, "
        "so something else held training then"
    )


def _pipeline(loader: LoaderReport | None) -> str:
    return "DataLoader's pass" if loader is not None else "dataset"


def _spread(cost: RestartCost) -> str | None:
    waits = cost.restart_waits_s
    if not waits:
        return None
    if len(waits) == 1:
        return f"a wait of {format_seconds(waits[0])}"
    return f"waits {format_seconds(min(waits))} to {format_seconds(max(waits))}"


def _relies_on(cost: RestartCost) -> tuple[str, ...]:
    if cost.stage is None:
        return ()
    if cost.measured and cost.stage_own_s is not None:
        return (
            f"{cost.stage} measured {format_seconds(cost.stage_own_s)} late after a fresh start",
        )
    return (f"{cost.stage} read off the stage graph, not measured",)


def _what_refills(cost: RestartCost) -> str:
    if cost.stage_kind is StageKind.WORKERS:
        return "the loader's worker processes start again"
    if cost.short_epoch:
        return (
            "an epoch is too short for the pipeline to reach a steady state, so each epoch is "
            "mostly start-up"
        )
    if cost.stage is None:
        return "the pipeline fills again"
    if cost.measured and cost.stage_kind not in (StageKind.SHUFFLE, StageKind.CACHE):
        return f"{cost.stage} is late with its first elements"
    if cost.stage_kind is StageKind.SHUFFLE:
        return f"{cost.stage} refills its buffer"
    if cost.stage_kind is StageKind.CACHE:
        return f"{cost.stage} is read again from the start"
    return f"{cost.stage} ramps up again"


def _restart_fix(cost: RestartCost, loader: LoaderReport | None, threads: int | None) -> str:
    if loader is not None and loader.built_anew:
        workers = loader.workers > 0
        return (
            f"The loop at {loader.built_anew} builds a new DataLoader for each pass, which "
            f"starts from empty{', its workers started again whatever it is passed' * workers}"
            f": build it once, before that loop, with {'num_workers > 0 and ' * (not workers)}"
            "persistent_workers=True, so a new pass finds its workers running (check that "
            "per-epoch state, such as a sampler's set_epoch or augmentation seeds, still "
            "changes each epoch)."
        )
    if loader is not None and loader.workers > 0 and loader.persistent_workers:
        return (
            "Each pass of the DataLoader starts from empty: its kept workers load nothing "
            "until a new pass hands them its indices, so the pass's first batch waits while a "
            "worker loads it whole. Longer epochs make it a smaller share."
        )
    if loader is not None and cost.stage_kind is not StageKind.WORKERS:
        return (
            "Each pass of the DataLoader starts from empty: with num_workers > 0 and "
            "persistent_workers=True a new pass finds its workers running (check that "
            "per-epoch state, such as a sampler's set_epoch or augmentation seeds, still "
            "changes each epoch)."
        )
    if cost.stage_kind is StageKind.WORKERS:
        return (
            "Pass persistent_workers=True to the DataLoader, so its workers outlive each "
            "epoch instead of starting again at every one (check that per-epoch state, such "
            "as a sampler's set_epoch or augmentation seeds, still changes each epoch)."
        )
    # A batch is never written-sequential here (`stage_sequential` covers maps and reads).
    argument = PARALLEL_ARGUMENT.get(cost.stage_kind) if cost.stage_kind else None
    if cost.stage_sequential and cost.measured and argument is not None and threads == 1:
        return (
            f"Give {cost.stage} {argument}=tf.data.AUTOTUNE: it is written to run on one "
            f"thread, so after every restart its elements come one at a time; or "
            f"{_REPEAT[0].lower()}{_REPEAT[1:]}."
        )
    if cost.stage_kind is StageKind.SHUFFLE:
        return f"{_REPEAT} (repeat() before shuffle() keeps the buffer full across epochs)."
    if cost.stage_kind is StageKind.CACHE:
        return f"{_REPEAT}; a restart then never re-reads the cache from its start."
    return f"{_REPEAT}."
