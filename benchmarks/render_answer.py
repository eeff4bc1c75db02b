"""The "Time to an answer" section of RESULTS.md: a pure function of the record.

For each tuned pipeline: the wall time of `tfperf tune` to its recommendation, the time its
study first measured a configuration within 5% of the final best, and where the wall time
went (`benchmarks.answer_record.TimeSplit`). Then one default `tfperf profile` of the
quickstart against an 8-trial tune of it, measured one after the other in the same run.
"""

from __future__ import annotations

from benchmarks.answer_record import TUNE_OVER_PROFILE_GOAL, ProfileAgainstTune, TimeSplit
from benchmarks.goals import Check
from benchmarks.record import BenchRecord, PipelineRecord, convergence
from benchmarks.render_model import duration, table

__all__ = ["answer_section", "check_profile_against_tune"]

_INTRO = (
    "For each tune: **wall**, the wall time from `tfperf tune` to its recommendation (the "
    "Tuning table's tune); **5% at**, when the study's trial that first came within 5% of "
    "its final best finished (the Tuning table's time to 5%), from the first trial's "
    "start; then where the wall time "
    "went, in seconds, summed over the study's trials (each a fresh process) and read from "
    "the study afterwards. **warm-up**: each phase's warm-up steps (the time to the first "
    "batch among them). **phases**: each phase's measured window. **stages**: the stage "
    "analysis of the baseline trial. **start-up**: each completed trial's process wall time "
    "(the child's start to its end) less those three: the interpreter's start and the "
    "imports, building the pipeline and the model; in brackets per completed trial. "
    "**stopped**: the whole process wall time of the trials that did not complete (pruned, "
    "failed, over a budget), their count in brackets. **re-measure**: the final "
    "re-measurement and confirmation of the finalists, from its lock trial's start to its "
    "end, its processes (each paying the same start-up) in brackets. **rest**: the tune's "
    "wall less all of these: the tuner's own work between processes (the sampler, the "
    "study's storage, the model's refit) and, for a command, its own start and report. The "
    "suite's tunes run `tfperf.tune` in the benchmark's process, so their wall leaves out "
    "the command's start; the quickstart's is the whole command."
)
_HEADER = [
    "tune",
    "wall",
    "5% at",
    "start-up",
    "warm-up",
    "phases",
    "stages",
    "stopped",
    "re-measure",
    "rest",
]


def answer_section(record: BenchRecord) -> str:
    """The section; "" for a record with neither a split nor the side-by-side figure."""
    rows = [_pipeline_row(p) for p in record.pipelines if p.tuning.split is not None]
    found = record.profile_against_tune
    if found is not None and found.split is not None:
        rows.append(_split_cells(f"quickstart, {found.trials} trials", found.split, "n/a"))
    if not rows and found is None:
        return ""
    parts = ["## Time to an answer"]
    if found is not None:
        parts.append(_side_by_side(found))
    if rows:
        parts.append(table(_INTRO, _HEADER, rows))
    return "\n\n".join(parts)


def _pipeline_row(pipeline: PipelineRecord) -> list[str]:
    tuning = pipeline.tuning
    assert tuning.split is not None  # the caller keeps only pipelines with a split
    index = convergence(tuning)
    reached = tuning.trials[index].elapsed_s if index is not None else None
    return _split_cells(pipeline.name, tuning.split, duration(reached))


def _split_cells(name: str, split: TimeSplit, reached: str) -> list[str]:
    per_trial = split.startup_per_trial_s
    return [
        name,
        duration(split.wall_s),
        reached,
        f"{split.startup_s:.0f}" + (f" ({per_trial:.1f})" if per_trial is not None else ""),
        f"{split.warmup_s:.0f}",
        f"{split.phases_s:.0f}",
        f"{split.stages_s:.0f}",
        f"{split.stopped_s:.0f} ({split.stopped})",
        f"{split.remeasure_s:.0f} ({split.remeasure_runs})",
        f"{split.rest_s:.0f}",
    ]


def _side_by_side(found: ProfileAgainstTune) -> str:
    ratio = found.ratio
    shown = f"{ratio:.1f}x" if ratio is not None else "n/a"
    met = "n/a" if ratio is None else ("yes" if ratio <= TUNE_OVER_PROFILE_GOAL else "**no**")
    return (
        f"`tfperf profile {found.pipeline}` (the default: three phases and the stage "
        f"analysis) took {duration(found.profile_s)}; `tfperf tune {found.pipeline} --trials "
        f"{found.trials}` on a fresh study, run right after it, took "
        f"{duration(found.tune_s)}: **{shown}** the profile's time (each the wall time of "
        "its command in a child process, start and imports included). The goal: at most "
        f"{TUNE_OVER_PROFILE_GOAL:g}x; met: {met}."
    )


def check_profile_against_tune(found: ProfileAgainstTune) -> Check:
    """Whether the quickstart's tune took at most `TUNE_OVER_PROFILE_GOAL` default profiles."""
    goal = f"tune --trials {found.trials} <= {TUNE_OVER_PROFILE_GOAL:g}x one profile"
    ratio = found.ratio
    if ratio is None:
        return Check(goal, None, "n/a", "the profile took no time")
    shown = f"{ratio:.1f}x ({duration(found.tune_s)} vs {duration(found.profile_s)})"
    return Check(goal, ratio <= TUNE_OVER_PROFILE_GOAL, shown)
