"""The benchmark's goals (issues 5 and 12), checked against a record, with a reason for each miss.

Each check returns a `Check`: whether the goal was met (None when the run has no figure for
it), what was measured, and for a miss a note that says why, from the figures themselves,
and what would fix it. Pure functions of the record: tested by equality.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from benchmarks.record import (
    CONVERGENCE_TOLERANCE,
    Overhead,
    PipelineRecord,
    Repeatability,
    Tuning,
    chosen_rate,
    chosen_trial,
    coefficient_of_variation,
    convergence,
    geomean,
    median,
    ratio,
    shared_cpu_bound,
    single_figure_convergence,
    spread,
)
from tfperf.knobs import format_value
from tfperf.measure import CONTENTION_AT
from tfperf.units import format_bytes

#: Issue 12's goals: tuned reaches this share of the stated limit (or a reason says why not),
#: the first trial within 5% of the final best is at most this one (the estimate is trial 3),
#: and tuned/AUTOTUNE's geometric mean over the pipelines reaches this.
LIMIT_GOAL = 0.80
TRIALS_GOAL = 6
GEOMEAN_GOAL = 1.5
OVERHEAD_GOAL_PCT = 2.0
CV_GOAL = 0.03
#: An estimate this near the final best missed "within 5%" by one trial's noise, not the model;
#: the judgement for records that kept no re-measured spreads (`Trial.remeasured_spread`).
NEAR_MISS = 0.90
#: Cores busy at this share of their capacity or more count as saturated.
SATURATED = 0.90
#: A CPU-bound miss is explained by input and training taking turns on the cores when the
#: tuned rate is this close (or its own spread, if wider) to the rate taking turns gives.
TURNS_TOLERANCE = 0.05


@dataclasses.dataclass(frozen=True)
class Check:
    """One goal on one pipeline (or on the whole run)."""

    goal: str
    met: bool | None
    measured: str
    note: str = ""


def pipeline_checks(record: PipelineRecord, cpu_count: int) -> list[Check]:
    """Every per-pipeline goal, in the order the report lists them."""
    checks = [
        check_autotune(record),
        check_limit(record, cpu_count),
        check_convergence(record),
        check_training(record),
    ]
    if record.tuning.ram_budget_bytes is not None:
        checks.append(check_ram_budget(record))
    return checks


def check_autotune(record: PipelineRecord) -> Check:
    """Tuned >= AUTOTUNE within noise; clearly above it where AUTOTUNE cannot reach; at least
    the pipeline's `autotune_goal` times AUTOTUNE where it has one."""
    target = record.autotune_goal
    name = record.reference
    goal = f"tuned clearly above {name}" if record.beyond_autotune else f"tuned >= {name}"
    if target is not None:
        goal = f"tuned >= {target:g}x {name}"
    found = ratio(record.tuned.end_to_end, record.autotune.end_to_end)
    if found is None:
        return Check(goal, None, "no figure", _missing(record))
    measured = f"{found.value:.2f}x ± {found.plus_minus:.2f}"
    if target is not None:
        if found.value >= target:
            return Check(goal, True, measured)
        return Check(goal, False, measured, _below_target(record, target))
    if record.beyond_autotune:
        met = found.value - found.plus_minus > 1
    else:
        met = found.value + found.plus_minus >= 1
    if met:
        return Check(goal, True, measured)
    changes = _changes(record.autotune.knobs, record.tuned.knobs)
    if not changes:
        note = (
            f"tfperf's own re-measurement chose the {name} configuration itself, so the two "
            "columns are one configuration measured twice"
        )
        note += (
            ": no searched knob beat it by more than the noise. A wider SEARCH_SPACE or more "
            "trials (`--trials`) would let the search look further."
            if record.beyond_autotune
            else "; their difference is run-to-run noise."
        )
    else:
        note = (
            f"The tuned configuration differs from {name} in {changes}. tfperf chose it by "
            f"the median of its own interleaved re-measurement; measured again here it is "
            f"{measured} of {name}, so the gain is smaller than this machine's run-to-run "
            "noise. More rounds (`--rounds`, `--repeats`) or longer runs (`--steps`) would "
            "separate them; a quieter machine too."
        )
    return Check(goal, False, measured, note)


def _below_target(record: PipelineRecord, target: float) -> str:
    model = record.tuning.model
    if model is None:
        return (
            f"tuned stays below {target:g}x {record.reference} and the study recorded no "
            "pipeline model (the baseline's stage analysis measured nothing), so the search "
            "had no thread "
            "counts to aim at."
        )
    ceiling = model.limit / max(median(record.autotune.end_to_end), 1e-9)
    return (
        f"The limit is {model.limit:,.0f} examples/s ({model.bound_by}), "
        f"{ceiling:.1f}x {record.reference}: "
        + (
            f"even the limit is below {target:g}x {record.reference} here. {model.explanation}"
            if ceiling < target
            else "the limit allows the goal, so the search or the estimate fell short; see "
            "the limit and estimate rows."
        )
    )


def check_limit(record: PipelineRecord, cpu_count: int) -> Check:
    """Tuned reaches 80% of tfperf's stated limit; a miss names what binds and what lifts it."""
    goal = f"tuned >= {LIMIT_GOAL:.0%} of limit"
    model = record.tuning.model
    end_to_end = median(record.tuned.end_to_end)
    if model is None or model.limit <= 0 or end_to_end <= 0:
        return Check(goal, None, "no figure", _missing(record))
    if not model.setting_probed:
        return Check(
            goal,
            None,
            "no figure",
            "The tuned configuration changes training to a setting the baseline trial did not "
            "probe, so tfperf states no limit for it.",
        )
    share = end_to_end / model.limit
    measured = f"{share:.0%} of {model.limit:,.0f}"
    if share > 1 + ratio_noise(record):
        return Check(goal, True, measured, _over_limit_note(record, cpu_count, share))
    if share >= LIMIT_GOAL:
        return Check(goal, True, measured)
    restart = restart_share(record)
    if restart is not None and restart < 1 and share / (1 - restart) >= LIMIT_GOAL:
        return Check(goal, True, measured, _restart_note(record, share, restart))
    turns = turns_rate(record)
    if model.bound_by == "cpu" and turns is not None and saturated(record, cpu_count):
        return Check(goal, True, measured, _turns_note(record, cpu_count, share, turns))
    if held_by_python(record, cpu_count):
        return Check(goal, True, measured, _python_note(record, cpu_count, share))
    return Check(goal, False, measured, _limit_note(record, cpu_count, share))


def saturated(record: PipelineRecord, cpu_count: int) -> bool:
    """Whether the tuned runs kept the cores busy: `SATURATED` of their capacity or more.

    Only then can the cores' time per example be what binds; with cores idle, a rate that
    matches taking turns says input and training did not overlap, not why.
    """
    return median(record.tuned.cpu_percent) >= SATURATED * 100 * cpu_count


def turns_rate(record: PipelineRecord) -> float | None:
    """The rate input and training reach taking turns on the cores, when tuned runs at it.

    From the tuned configuration's own runs: its pipeline-only and compute-only medians give
    `1 / (1/P + 1/C)` (`shared_cpu_bound`); None when a figure is missing or the tuned
    end-to-end median is not within `TURNS_TOLERANCE` (or its spread) of that rate, so taking
    turns does not account for it.
    """
    tuned = record.tuned
    if not tuned.pipeline_only or not tuned.compute_only:
        return None
    turns = shared_cpu_bound(median(tuned.pipeline_only), median(tuned.compute_only))
    if turns is None:
        return None
    tolerance = max(TURNS_TOLERANCE, ratio_noise(record))
    return turns if abs(median(tuned.end_to_end) / turns - 1) <= tolerance else None


def _turns_note(record: PipelineRecord, cpu_count: int, share: float, turns: float) -> str:
    """Tuned below a CPU limit because input and training do not overlap on the cores."""
    model = record.tuning.model
    assert model is not None
    tuned = record.tuned
    pipeline, compute = median(tuned.pipeline_only), median(tuned.compute_only)
    input_share = (1 / pipeline) / (1 / pipeline + 1 / compute)
    return (
        f"The gap is the overlap the CPU limit assumes: {model.limit:,.0f} examples/s counts "
        f"input and training sharing all {cpu_count} cores at once. In the same runs the tuned "
        f"configuration's input alone delivers {pipeline:,.0f} examples/s and its model alone "
        f"{compute:,.0f}; taking turns on the cores they give 1 / (1/{pipeline:,.0f} + "
        f"1/{compute:,.0f}) = {turns:,.0f}, and tuned runs at {median(tuned.end_to_end):,.0f} "
        f"({share:.0%} of the limit, {median(tuned.cpu_percent):.0f}% of {100 * cpu_count}% "
        "CPU): each example costs the input's CPU time plus the model's, one after the other. "
        f"The cores' time per example binds; less CPU per example in the input, {input_share:.0%} "
        "of each turn (cache() after its costliest stage, cheaper decoding), or moving the "
        "model's share off the host (a GPU) would lift it."
    )


def held_by_python(record: PipelineRecord, cpu_count: int) -> bool:
    """Whether the interpreter lock accounts for a miss: a parallel stage calls Python, the
    cores are not saturated, and the tuned input alone stops short of the goal line.

    Threads of a stage that calls Python queue for one lock per process, so the input stalls
    with cores idle however many threads it gets (docs/limit.md, "A stage that calls Python").
    """
    model, tuned = record.tuning.model, record.tuned
    if model is None or model.python_stage is None or not tuned.pipeline_only:
        return False
    idle = not saturated(record, cpu_count)
    return idle and median(tuned.pipeline_only) < LIMIT_GOAL * model.limit


def _python_note(record: PipelineRecord, cpu_count: int, share: float) -> str:
    """Tuned below the limit because the input's Python calls queue for the one lock."""
    model = record.tuning.model
    assert model is not None and model.python_stage is not None
    tuned = record.tuned
    alone = median(tuned.pipeline_only)
    return (
        f"The gap is Python's interpreter lock: `{model.python_stage}` calls Python, so its "
        "threads queue for the process's one lock, which the limit does not count. In the "
        f"same runs the tuned input alone delivers {alone:,.0f} examples/s "
        f"({alone / model.limit:.0%} of the limit), end to end reaches {share:.0%} of it, "
        f"using {median(tuned.cpu_percent):.0f}% of {100 * cpu_count}% CPU: the cores wait "
        "on the lock. Fewer, larger Python calls (one request for many objects), TensorFlow "
        "ops in its place, or the input split over processes (each with its own lock) would "
        "lift it."
    )


def restart_share(record: PipelineRecord) -> float | None:
    """The share of the tuned configuration's epoch spent refilling after the restart.

    An epoch of `epoch_steps` batches at the tuned rate lasts `examples / rate` seconds, the
    refill included; None when the tuned runs crossed no restart.
    """
    tuned = record.tuned
    batch = tuned.knobs.get("batch_size")
    rate = median(tuned.end_to_end)
    if not tuned.restart_s or not tuned.epoch_steps or not isinstance(batch, int) or rate <= 0:
        return None
    epoch_s = tuned.epoch_steps * batch / rate
    return min(1.0, median(tuned.restart_s) / epoch_s)


def _restart_note(record: PipelineRecord, share: float, restart: float) -> str:
    """Tuned below the limit because each epoch restarts: the limit is a steady-state rate.

    Made only where the epoch less its refill runs at `LIMIT_GOAL` of the limit or more, so
    the restart accounts for the miss rather than a part of it.
    """
    tuned = record.tuned
    stage = f"`{tuned.restart_stage}`" if tuned.restart_stage else "the pipeline"
    rest = share / (1 - restart)
    # Above the limit, the rest of the epoch drains what the refill read: no steady rate.
    steady = (
        f"the rest of the epoch runs at {rest:.0%} of the limit"
        if rest <= 1 + ratio_noise(record)
        else "the refill holds more of the epoch than the gap, and the steps after it drain it"
    )
    gap = (
        f"The gap is the restart, which the limit (a steady-state rate) does not count: "
        f"{steady}. Each epoch ({tuned.epoch_steps} steps) "
    )
    if record.reference != "AUTOTUNE":  # a framework's own rule: a DataLoader's passes
        return gap + (
            f"begins a new pass of the DataLoader and its first batch waits "
            f"{median(tuned.restart_s):.2f} s while the workers fill their queues again: "
            f"{restart:.0%} of the tuned epoch's time, against a gap of {1 - share:.0%}. "
            "Longer epochs make it a smaller share; without persistent_workers each pass "
            "also starts the workers again."
        )
    return gap + (
        f"restarts the dataset and the first step waits "
        f"{median(tuned.restart_s):.2f} s while {stage} refills: {restart:.0%} of the tuned "
        f"epoch's time, against a gap of {1 - share:.0%}. repeat() before the shuffle (the "
        "dataset never restarts) or a smaller shuffle buffer would lift it."
    )


def ratio_noise(record: PipelineRecord) -> float:
    """The tuned figure's own spread: how far above the limit still counts as at it."""
    return spread(record.tuned.end_to_end)


def _over_limit_note(record: PipelineRecord, cpu_count: int, share: float) -> str:
    """Tuned beyond the stated limit and its noise: the model's error, said as such."""
    model = record.tuning.model
    assert model is not None
    cpu = median(record.tuned.cpu_percent)
    cause = {
        "cpu": (
            "the input's CPU per example the model's roofline counts (measured at a "
            "reference configuration's rate, docs/limit.md) is more than the tuned "
            f"configuration spends (it ran at {cpu:.0f}% of {100 * cpu_count}% CPU)"
        ),
        "compute": "the model alone ran faster in the tuned configuration's process",
        "sequential-stage": "the sequential stage ran faster than measured alone",
    }.get(model.bound_by, "its figures were measured under other conditions")
    return (
        f"Tuned is {share:.0%} of the stated limit, beyond its noise: the model's limit is not "
        f"a bound here, because {cause}. The model's error, not a gain to discount."
    )


def _limit_note(record: PipelineRecord, cpu_count: int, share: float) -> str:
    model = record.tuning.model
    assert model is not None
    cpu = median(record.tuned.cpu_percent)
    text = (
        f"The limit binds on {_BOUND_WORDS.get(model.bound_by, model.bound_by)}: "
        f"{model.explanation} The tuned configuration reaches {share:.0%} of it, using "
        f"{cpu:.0f}% of {100 * cpu_count}% CPU."
    )
    if model.bound_by == "cpu" and saturated(record, cpu_count):
        return text + (
            " The cores are saturated, so the gap is CPU the model's figures did not count "
            "(the runtime's own threads, contention between input and training), not a "
            "configuration the search missed."
        )
    return text + (
        " The cores are not saturated, so part of the gap is left by the search or by "
        "overlap (input and steps not fully overlapping); more trials may close some of it."
        + _alone_note(record)
        + _interference_note(record, cpu_count)
    )


def _alone_note(record: PipelineRecord) -> str:
    """Where the tuned configuration's own phases place an unsaturated gap: input or overlap.

    Its pipeline-only phase is the input with the machine to itself: below the goal line, the
    input stops short on its own and what holds it is not the cores; above it, the input
    could reach the goal and the gap opens when input and training run together.
    """
    model = record.tuning.model
    tuned = record.tuned
    if model is None or not tuned.pipeline_only or not tuned.compute_only:
        return ""
    alone, compute = median(tuned.pipeline_only), median(tuned.compute_only)
    end_to_end = median(tuned.end_to_end)
    text = (
        f" In the same runs its input alone delivers {alone:,.0f} examples/s "
        f"({alone / model.limit:.0%} of the limit) and its model alone {compute:,.0f}"
    )
    if alone < LIMIT_GOAL * model.limit:
        return text + (
            ": the input stops short of the goal even with the cores to itself, so its own "
            "stages bind it (threads waiting on a call or a lock, a stage sized too small, "
            "CPU the model's figure does not count), a resource tfperf does not yet name. The "
            "stage analysis of the tuned configuration (`tfperf profile --set ...` with its "
            "knobs) shows which stage delivers least."
        )
    turns = shared_cpu_bound(alone, compute) or 0.0
    where = (
        f"between taking turns ({turns:,.0f}) and sharing every core at once (the limit): "
        "they overlap only in part"
        if end_to_end > turns
        else f"no faster than taking turns ({turns:,.0f}): they do not overlap"
    )
    return text + (
        f": the input could reach the goal alone, and together they run at {end_to_end:,.0f}, "
        f"{where}."
    )


def _interference_note(record: PipelineRecord, cpu_count: int) -> str:
    """How much the model's step slows beside the input, when it slows past `CONTENTION_AT`.

    The CPU limit adds the input's and the model's CPU time per example and divides the cores
    by it: running together costs nothing beyond that. The tuned runs' compute slowdown (an
    example's compute time end to end over the compute-only phase's) measures what it does
    cost; with the cores not saturated, that is time neither the cores nor the limit count.
    Stated, not counted as explaining the miss: the step's threads queue for the cores beside
    the input's, and tfperf does not measure that queueing yet (docs/limit.md, "What the limit
    does not count").
    """
    tuned = record.tuned
    if not tuned.compute_slowdown or not tuned.compute_only or not tuned.end_to_end:
        return ""
    slowdown = median(tuned.compute_slowdown)
    if slowdown < CONTENTION_AT:
        return ""
    computing = min(1.0, slowdown * median(tuned.end_to_end) / median(tuned.compute_only))
    return (
        f" Beside the input, the model's step computes {slowdown:.1f}x as long per example as "
        f"alone ({computing:.0%} of the end-to-end time is the step computing) while the cores "
        f"are {median(tuned.cpu_percent):.0f}% of {100 * cpu_count}% busy: running together "
        "costs the step more than the CPU time the input takes, which the limit does not count "
        '(docs/limit.md, "What the limit does not count", traces it to the step\'s threads '
        "queueing for the cores)."
    )


_BOUND_WORDS = {
    "compute": "the model's own step (compute)",
    "cpu": "the host's cores, shared by input and training (cpu)",
    "sequential-stage": "a stage that cannot run in parallel (sequential-stage)",
}


def check_convergence(record: PipelineRecord) -> Check:
    """Within 5% of the study's final best by trial 6 (the estimate is trial 3)."""
    goal = f"within {CONVERGENCE_TOLERANCE:.0%} of best by trial {TRIALS_GOAL}"
    trials = record.tuning.trials
    index = convergence(record.tuning)
    if index is None:
        return Check(goal, None, "no completed trial", _missing(record))
    reached = trials[index]
    minutes = (reached.elapsed_s or 0.0) / 60
    measured = f"trial {index + 1} of {len(trials)}, {minutes:.1f} min"
    single = single_figure_convergence(record.tuning)
    if single is not None and single != index:
        measured += f" (by single trial figures: trial {single + 1})"
    if index + 1 <= TRIALS_GOAL:
        return Check(goal, True, measured)
    return Check(goal, False, measured, _late_note(record, index))


def _late_note(record: PipelineRecord, index: int) -> str:
    model = record.tuning.model
    if model is None or model.trial is None:
        where = (
            "The study measured no estimate (no pipeline model from the baseline), so TPE "
            "searched unaided and its first 8 proposals are random."
        )
    else:
        later = (model.second_trial, model.pooled_trial, model.runner_up_trial)
        where = _estimates_reached(record, model.trial, *later)
    return f"The study's best came late (trial {index + 1}). {where}"


def _estimates_reached(
    record: PipelineRecord,
    first: int,
    second: int | None,
    pooled: int | None = None,
    runner_up: int | None = None,
) -> str:
    """How near the final best the model's estimates came, and what that says."""
    trials = record.tuning.trials
    best = chosen_rate(record.tuning) or max((t.figure or 0.0 for t in trials), default=0.0)

    def share(number: int) -> float | None:
        trial = next((t for t in trials if t.number == number), None)
        figure = trial.figure if trial else None
        return figure / best if figure and best else None

    shares = {first: share(first)}
    reached = f"The estimate (trial {first + 1}) reached {_share(shares[first])} of the final best"
    if second is not None:
        shares[second] = share(second)
        reached += (
            f", its estimate with training changed (trial {second + 1}) {_share(shares[second])}"
        )
    elif record.tuning.changes_training:
        reached += (
            "; the model proposed no estimate with training changed (no setting predicted "
            f"beyond the noise), though the final best changes "
            f"{', '.join(record.tuning.changes_training)}"
        )
    if pooled is not None:
        shares[pooled] = share(pooled)
        reached += f", its pooled estimate (trial {pooled + 1}) {_share(shares[pooled])}"
    if runner_up is not None:
        shares[runner_up] = share(runner_up)
        reached += f", its runner-up (trial {runner_up + 1}) {_share(shares[runner_up])}"
    nearest = max((v for v in shares.values() if v is not None), default=0.0)
    number = max(shares, key=lambda n: shares[n] or 0.0)
    noise = _pair_noise(record.tuning, number)
    if noise is not None:
        return reached + _noise_verdict(nearest, noise)
    if nearest >= NEAR_MISS:
        return (
            f"{reached}: within a single trial's noise of the goal's 5% (one trial's figure "
            "moves by several percent on a shared machine), not a wrong model."
        )
    return (
        f"{reached}: the model's thread counts or training setting were off, and TPE needed "
        "the trials after it to find the best. A better model of the binding stage (see the "
        "estimates' predicted vs measured) would bring it earlier."
    )


def _pair_noise(tuning: Tuning, number: int) -> float | None:
    """The re-measured spreads of trial `number` and of the chosen configuration, added (as a
    ratio's ± adds its figures'); None when either was not re-measured with its spread kept."""
    trial = next((t for t in tuning.trials if t.number == number), None)
    chosen = chosen_trial(tuning.trials, tuning.best_label)
    spread = tuning.chosen_spread
    if spread is None and chosen is not None:
        spread = chosen.remeasured_spread
    if trial is None or trial.remeasured_spread is None or spread is None:
        return None
    return trial.remeasured_spread + spread


def _noise_verdict(nearest: float, noise: float) -> str:
    """Whether the nearest estimate's shortfall is within the two figures' measured noise."""
    if nearest + noise >= 1 - CONVERGENCE_TOLERANCE:
        return (
            f": within the measured noise of the goal's {CONVERGENCE_TOLERANCE:.0%}. The nearest "
            f"estimate's and the chosen configuration's re-measured spreads add up to "
            f"±{noise:.0%}, so measured again the two may land within {CONVERGENCE_TOLERANCE:.0%} "
            "of each other: at this noise the bar cannot tell whether the model missed the best."
        )
    return (
        f": short by more than the two figures' re-measured spreads (±{noise:.0%} together), "
        "so the model's thread counts or training setting were off, and TPE needed the trials "
        "after it to find the best. A better model of the binding stage (see the estimates' "
        "predicted vs measured) would bring it earlier."
    )


def _share(value: float | None) -> str:
    return f"{value:.0%}" if value is not None else "no figure"


def check_training(record: PipelineRecord) -> Check:
    """The recommendation changes training only when it beats the input-only best beyond noise."""
    goal = "training changed only beyond noise"
    choice = record.tuning.training
    changes = record.tuning.changes_training
    if choice is None:
        return Check(goal, None, "no figure", "The run recorded no input-only choice.")
    if not changes:
        if choice.fastest is not None and choice.gain is not None:
            return Check(
                goal,
                True,
                "unchanged",
                f"{choice.fastest} changes training for {choice.gain_words}, {choice.kept_because}",
            )
        return Check(goal, True, "unchanged")
    measured = f"changes {', '.join(changes)}"
    if choice.significant:
        return Check(goal, True, measured, f"{choice.gain or 0:.2f}x over {choice.input_only}")
    return Check(
        goal,
        False,
        measured,
        f"The recommendation changes {', '.join(changes)} although its gain over the best "
        f"input-only configuration ({choice.input_only}) is within noise.",
    )


def check_geomean(records: Sequence[PipelineRecord]) -> Check:
    """The geometric mean of tuned/AUTOTUNE over the pipelines reaches 1.5x."""
    goal = f"geomean tuned/AUTOTUNE >= {GEOMEAN_GOAL:g}x"
    found = [ratio(r.tuned.end_to_end, r.autotune.end_to_end) for r in records]
    value = geomean([r.value for r in found if r is not None])
    if value is None:
        return Check(goal, None, "no figure")
    count = sum(r is not None for r in found)
    measured = f"{value:.2f}x over {count} pipeline{'' if count == 1 else 's'}"
    if value >= GEOMEAN_GOAL:
        return Check(goal, True, measured)
    low = sorted(
        (r.name for r, f in zip(records, found, strict=True) if f is not None and f.value < 1.2),
    )
    return Check(
        goal,
        False,
        measured,
        "Most pipelines here are bound by the cores AUTOTUNE already fills, where no "
        "configuration beats it by much"
        + (f" ({', '.join(low)} within 1.2x)" if low else "")
        + "; their limit rows say what binds.",
    )


def check_ram_budget(record: PipelineRecord) -> Check:
    """The tuned configuration stays within the study's RAM budget."""
    budget = record.tuning.ram_budget_bytes
    goal = "tuned within the RAM budget"
    if budget is None:
        return Check(goal, None, "no budget")
    peak = record.tuned.peak_rss_bytes
    measured = f"{format_bytes(peak)} of {format_bytes(budget)}"
    over = sum(1 for trial in record.tuning.trials if trial.status == "ram-budget")
    if peak <= budget:
        note = f"{over} trial{'' if over == 1 else 's'} stopped over the budget during the search"
        return Check(goal, True, measured, note if over else "")
    return Check(
        goal,
        False,
        measured,
        "The tuned configuration's final runs peaked above the budget its trials met: RAM "
        "use moves between runs (tf.data buffers, allocator caching). Its trial stayed "
        "within; a margin below the budget (or a lower `--ram-budget`) would absorb it.",
    )


def check_overhead(overhead: Overhead) -> Check:
    """Profiler overhead under 2%, from the direct costs; the A/B timings cross-check it."""
    goal = f"profiler overhead < {OVERHEAD_GOAL_PCT:g}%"
    sampler_pct = overhead.sampler_us_per_sample / (overhead.sampler_interval_ms * 10)
    worst = max((row.instrumentation_pct for row in overhead.rows), default=0.0) + sampler_pct
    measured = f"{worst:.2f}% direct"
    # With fewer than 3 repeats the A/B spread is unknown: no evidence either way.
    noisy = [
        row
        for row in overhead.rows
        if overhead.repeats >= 3
        and row.overhead_pct - max(row.spread_bare_pct, row.spread_profiled_pct) > OVERHEAD_GOAL_PCT
    ]
    if worst < OVERHEAD_GOAL_PCT and not noisy:
        return Check(goal, True, measured)
    if worst >= OVERHEAD_GOAL_PCT:
        note = (
            f"The direct costs (per-step instrumentation plus the sampler's CPU share) reach "
            f"{worst:.2f}% on the fastest step: with steps this short, fixed per-step costs "
            "show. Longer steps (larger batches) make them negligible."
        )
    else:
        names = ", ".join(row.workload for row in noisy)
        note = (
            f"The A/B timings of {names} differ by more than their spread, above what the "
            "direct costs explain: something besides the profiler's work (the sampler's "
            "thread waking, cache effects) costs time there."
        )
    return Check(goal, False, measured, note)


def check_repeatability(repeatability: Repeatability) -> Check:
    """One configuration measured several times varies by under 3% (coefficient of variation)."""
    goal = f"repeatability CV < {CV_GOAL:.0%}"
    cv = coefficient_of_variation(repeatability.end_to_end)
    if cv is None:
        return Check(goal, None, "fewer than two runs")
    measured = f"{cv:.1%} over {len(repeatability.end_to_end)} runs"
    if cv < CV_GOAL:
        return Check(goal, True, measured)
    return Check(
        goal,
        False,
        measured,
        "Each run is a fresh process on a shared 2-core machine: other processes, the "
        "kernel's scheduling and frequency changes move a run by several percent, and a "
        "run of a few seconds does not average it out. Longer runs (`--steps`), a quiet "
        "machine or pinned cores would lower it; tfperf already compares configurations by "
        "interleaved medians for this reason.",
    )


def _changes(old: dict[str, object], new: dict[str, object]) -> str:
    diffs = [
        f"{name} {format_value(old.get(name))} -> {format_value(value)}"
        for name, value in new.items()
        if old.get(name) != value
    ]
    return ", ".join(diffs)


def describe_changes(old: dict[str, object], new: dict[str, object]) -> str:
    """The knobs `new` changes from `old`, as "name old -> new, ..."; "none" when equal."""
    return _changes(old, new) or "none"


def _missing(record: PipelineRecord) -> str:
    failures: Sequence[str] = (
        record.baseline.failures + record.autotune.failures + record.tuned.failures
    )
    if failures:
        return "Runs failed: " + "; ".join(failures[:3])
    return "The run recorded no figure for this goal."
