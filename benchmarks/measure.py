"""Measures one benchmark pipeline with tfperf's own machinery, and returns plain records.

For each pipeline: `prepare` runs it once so its data exists before anything is timed; `tune`
runs `tfperf.tune` on a fresh study and reads the study's trials back, and where its time
went (`benchmarks.answer.time_split`); `measure_final` runs the baseline, AUTOTUNE and tuned
configurations side by side (`tfperf.tuner._remeasure`, unsettled: every repeat, in
interleaved rounds, each run a fresh `run_trial` child process), keeping every phase of every
run. The limit the tuned figure is compared with is tfperf's own, from the study's baseline
stage analysis (`TuneResult.limit`), not a phase of the tuned configuration.
Nothing here prints: progress goes to the `log` callback.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.answer import time_split
from benchmarks.record import (
    Figure,
    ModelFigures,
    Overhead,
    OverheadRow,
    Repeatability,
    TrainingChoice,
    Trial,
    Tuning,
)
from benchmarks.suite import BENCHMARKS_DIR, Settings, Spec
from tfperf.knobs import Knobs
from tfperf.results import TrialOutcome, TrialStatus
from tfperf.results.tune import Measurement, Reference, speedup
from tfperf.trials import Budgets, TrialRequest, run_trial
from tfperf.tuner import Finalist
from tfperf.tuner._remeasure import Repeats, remeasure
from tfperf.tuner._search import autotune_knobs

if TYPE_CHECKING:
    import optuna

    from tfperf.pipeline import PipelineFile
    from tfperf.results.tune import TuneResult

Log = Callable[[str], None]

#: How long preparing a pipeline (writing its data, one step) may take.
PREPARE_TIMEOUT_S = 900.0


class BenchError(RuntimeError):
    """A benchmark could not be measured; the message names the pipeline and the fix."""


def prepare(spec: Spec, pipeline: PipelineFile) -> None:
    """Runs the baseline for one step in a child, so data generation is never timed.

    Raises:
        BenchError: the pipeline failed; the message says how to see why.
    """
    request = TrialRequest(spec.path, pipeline.baseline, steps=1, warmup=0)
    outcome = run_trial(request, Budgets(timeout_s=PREPARE_TIMEOUT_S))
    if outcome.status is not TrialStatus.COMPLETE or outcome.result is None:
        raise BenchError(
            f"{spec.name}: preparing its data failed ({outcome.status.value}): {outcome.reason}\n"
            f"Run `tfperf profile {spec.path} --steps 5 --debug` to see the full error."
        )


def tune(
    spec: Spec, pipeline: PipelineFile, settings: Settings, storage: str
) -> tuple[TuneResult, Tuning]:
    """Runs `tfperf.tune` on a new study in `storage`; returns its result and its trials."""
    import tfperf

    options = tfperf.TuneOptions(
        trials=settings.trials,
        steps=settings.steps_for(spec),
        min_seconds=settings.min_seconds,
        warmup=settings.warmup,
        ram_budget_bytes=spec.ram_budget_bytes,
        trial_timeout_s=spec.trial_timeout_s,
        storage=storage,
        study_name=spec.name,
        seed=settings.seed,
        finalists=settings.finalists,
        rounds=settings.rounds,
    )
    result = tfperf.tune(pipeline, options)
    split = time_split(storage, spec.name, result.wall_s)
    trials, search_s = study_trials(storage, spec.name)
    trials = with_remeasured(trials, result.candidates)
    tuning = Tuning(
        trials_budget=settings.trials,
        steps=settings.steps_for(spec),
        min_seconds=settings.min_seconds,
        wall_s=result.wall_s,
        search_s=search_s,
        ram_budget_bytes=result.ram_budget_bytes,
        trials=trials,
        best_label=result.best.label,
        recommendation=result.recommendation,
        changes_training=list(result.changes_training),
        model=model_figures(result),
        training=training_choice(result),
        split=split,
        chosen_median=result.best.median,
        chosen_spread=result.best.spread if result.best.spread_known else None,
    )
    return result, tuning


def model_figures(result: TuneResult) -> ModelFigures | None:
    """The limit under the tuned configuration's training setting, and the estimates'
    predicted vs measured rates; None without a model."""
    if result.limit is None:
        return None
    limit = result.best_limit or result.limit
    estimate = result.estimate_of(Reference.ESTIMATE)
    second = result.estimate_of(Reference.TRAINING)
    pooled = result.estimate_of(Reference.POOL)
    runner = result.estimate_of(Reference.RUNNER_UP)
    found = result.search_gain
    return ModelFigures(
        limit=limit.examples_per_sec,
        bound_by=limit.bound_by.value,
        explanation=limit.explanation,
        predicted=estimate.predicted_examples_per_sec if estimate else None,
        measured=estimate.measured_examples_per_sec if estimate else None,
        trial=estimate.trial_number if estimate else None,
        baseline_limit=result.limit.examples_per_sec if limit is not result.limit else None,
        setting_probed=result.best_limit is not None or not result.changes_training,
        second_predicted=second.predicted_examples_per_sec if second else None,
        second_measured=second.measured_examples_per_sec if second else None,
        second_trial=second.trial_number if second else None,
        second_changes=list(second.changes_training) if second else [],
        pooled_pool=pooled.knobs.private_threadpool_size if pooled else None,
        pooled_predicted=pooled.predicted_examples_per_sec if pooled else None,
        pooled_measured=pooled.measured_examples_per_sec if pooled else None,
        pooled_trial=pooled.trial_number if pooled else None,
        runner_up_predicted=runner.predicted_examples_per_sec if runner else None,
        runner_up_measured=runner.measured_examples_per_sec if runner else None,
        runner_up_trial=runner.trial_number if runner else None,
        runner_up_setting=(
            [f"{n} {_plain(runner.knobs).get(n)}" for n in runner.changes_training]
            if runner
            else []
        ),
        python_stage=limit.python_stage,
        search_gain_estimate=found.estimate if found else None,
        search_gain=found.gain.ratio if found else None,
        search_gain_spread=found.gain.spread if found else None,
        search_gain_significant=found.gain.significant if found else None,
    )


def training_choice(result: TuneResult) -> TrainingChoice | None:
    """What the input-only rule decided; None in results from before it."""
    if result.input_only is None:
        return None
    changer = result.best if result.changes_training else result.fastest
    passed = result.fastest if result.changes_training else None
    gain = result.gain_over_input_only
    return TrainingChoice(
        input_only=result.input_only.label,
        fastest=changer.label if changer is not None else None,
        gain=gain.ratio if gain else None,
        spread=gain.spread if gain else None,
        significant=gain.significant if gain else None,
        passed_over=passed.label if passed is not None else None,
        passed_over_gain=speedup(passed, result.best).ratio if passed is not None else None,
    )


def study_trials(storage: str, study_name: str) -> tuple[list[Trial], float]:
    """The study's finished trials in order, and the seconds from the first start to the last end.

    A trial's figure is its end-to-end examples/s when it completed within every budget;
    pruned, failed and over-budget trials have None.
    """
    import optuna

    study = optuna.load_study(study_name=study_name, storage=storage)
    # Only trials that measured knobs: tfperf may keep bookkeeping trials (locks) in a study.
    finished = [
        t
        for t in study.get_trials(deepcopy=False)
        if t.state.is_finished() and "knobs" in t.user_attrs
    ]
    starts = [t.datetime_start for t in finished if t.datetime_start is not None]
    ends = [t.datetime_complete for t in finished if t.datetime_complete is not None]
    if not starts or not ends:
        return [], 0.0
    origin = min(starts)
    trials = [
        Trial(
            number=t.number,
            status=str(t.user_attrs.get("status") or t.state.name.lower()),
            examples_per_sec=_figure(t),
            elapsed_s=(t.datetime_complete - origin).total_seconds()
            if t.datetime_complete
            else None,
            reference=t.user_attrs.get("reference"),
        )
        for t in sorted(finished, key=lambda t: t.number)
    ]
    return trials, (max(ends) - origin).total_seconds()


def with_remeasured(trials: list[Trial], measured: Sequence[Measurement]) -> list[Trial]:
    """`trials` with the median and spread of each re-measured configuration on the trial that
    ran it (the confirmed one for the chosen configuration, with the median it was chosen on)."""
    by_trial = {m.trial_number: m for m in measured if m.trial_number is not None}

    def figures(number: int) -> dict[str, float | None]:
        m = by_trial.get(number)
        if m is None:
            return {"remeasured": None, "selected": None, "remeasured_spread": None}
        return {
            "remeasured": m.median,
            "selected": m.selection_median if m.confirmed else None,
            "remeasured_spread": m.spread,
        }

    return [dataclasses.replace(t, **figures(t.number)) for t in trials]


def _plain(knobs: Knobs) -> dict[str, Any]:
    """Knob values as JSON has them (the precision as its string) and call sites by name."""
    return {**knobs.to_dict(), **knobs.sites}


def _figure(trial: optuna.trial.FrozenTrial) -> float | None:
    feasible = all(value <= 0 for value in trial.constraints.values())
    if trial.user_attrs.get("status") != TrialStatus.COMPLETE.value or not feasible:
        return None
    return float(trial.values[0]) if trial.values else None


def final_configurations(pipeline: PipelineFile, result: TuneResult) -> dict[str, Knobs]:
    """The three configurations the table compares, by label.

    The second reference ("autotune") is the framework's own rule where it has one (PyTorch:
    num_workers = cores), else tf.data's AUTOTUNE (`reference_name` says which).
    """
    return {
        "baseline": pipeline.baseline,
        "autotune": _rule(pipeline) or autotune_knobs(pipeline.baseline),
        "tuned": result.best.knobs,
    }


def reference_name(pipeline: PipelineFile) -> str:
    """How the table names the second reference of `pipeline`."""
    return "PyTorch's rule" if _rule(pipeline) is not None else "AUTOTUNE"


def _rule(pipeline: PipelineFile) -> Knobs | None:
    from tfperf import frameworks
    from tfperf.hardware import detect_machine

    framework = frameworks.get(pipeline.framework)
    return framework.rule(pipeline.baseline, detect_machine().cpu_count)


def measure_final(
    spec: Spec,
    configurations: dict[str, Knobs],
    settings: Settings,
    budgets: Budgets,
    log: Log,
) -> dict[str, Figure]:
    """Measures each configuration `settings.repeats` times, interleaved; one Figure per label.

    Labels with the same knobs (the tuned configuration may be AUTOTUNE's) are measured once
    and share their figures: the report then shows one measurement, not two noisy copies.
    """
    distinct: dict[str, str] = {}  # knobs key -> the first label with those knobs
    for label, knobs in configurations.items():
        distinct.setdefault(_key(knobs), label)
    finalists = [Finalist(label, None, configurations[label]) for label in distinct.values()]
    runs: dict[str, list[TrialOutcome]] = {finalist.label: [] for finalist in finalists}

    def measured(finalist: Finalist, outcome: TrialOutcome) -> None:
        runs[finalist.label].append(outcome)
        log(f"  {finalist.label:<9} {_describe(outcome)}")

    request = _requester(spec, settings)
    # Not settled: every repeat of every configuration, since these are the figures reported.
    repeats = Repeats(settings.repeats, request, budgets, run_trial, measured)
    remeasure(finalists, repeats, settle=False)
    return {
        label: _as_figure(label, knobs, runs[distinct[_key(knobs)]])
        for label, knobs in configurations.items()
    }


def measure_repeatability(
    spec: Spec, knobs: Knobs, settings: Settings, budgets: Budgets, log: Log
) -> Repeatability:
    """One configuration measured `settings.cv_repeats` times in a row."""
    outcomes: list[TrialOutcome] = []

    def measured(finalist: Finalist, outcome: TrialOutcome) -> None:
        outcomes.append(outcome)
        log(f"  repeat {len(outcomes)}/{settings.cv_repeats}: {_describe(outcome)}")

    finalist = Finalist("repeatability", None, knobs)
    requester = _requester(spec, settings)
    repeats = Repeats(settings.cv_repeats, requester, budgets, run_trial, measured)
    remeasure([finalist], repeats, settle=False)
    figure = _as_figure("repeatability", knobs, outcomes)
    return Repeatability(pipeline=spec.name, knobs=figure.knobs, end_to_end=figure.end_to_end)


def measure_overhead(settings: Settings, workloads: Sequence[str]) -> Overhead:
    """Runs `python -m benchmarks.overhead` in a child (its own TensorFlow) and reads its JSON.

    Raises:
        BenchError: the overhead benchmark failed; the message carries the end of its output.
    """
    with tempfile.TemporaryDirectory(prefix="tfperf-overhead-") as folder:
        path = Path(folder) / "overhead.json"
        command = [
            sys.executable,
            "-m",
            "benchmarks.overhead",
            "--steps",
            str(settings.overhead_steps),
            "--repeats",
            str(settings.overhead_repeats),
            "--json",
            str(path),
            *(argument for name in workloads for argument in ("--workload", name)),
        ]
        done = subprocess.run(
            command, cwd=BENCHMARKS_DIR.parent, capture_output=True, text=True, check=False
        )
        if done.returncode != 0 or not path.exists():
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
            raise BenchError(
                f"the overhead benchmark failed (exit status {done.returncode}); run "
                f"`python -m benchmarks.overhead` to see why. Its output ended with:\n{tail}"
            )
        data = json.loads(path.read_text(encoding="utf-8"))
    rows = [OverheadRow(**row) for row in data.pop("rows")]
    return Overhead(**data, rows=rows)


def _requester(spec: Spec, settings: Settings) -> Callable[[Knobs], TrialRequest]:
    steps = settings.steps_for(spec)

    def request(knobs: Knobs) -> TrialRequest:
        return TrialRequest(
            spec.path,
            knobs,
            steps=steps,
            min_seconds=settings.min_seconds,
            warmup=settings.warmup,
        )

    return request


def _as_figure(label: str, knobs: Knobs, outcomes: Sequence[TrialOutcome]) -> Figure:
    results = [o.result for o in outcomes if o.status is TrialStatus.COMPLETE and o.result]
    restarts = [r.restarts for r in results if r.restarts is not None and r.restarts.restarts]
    return Figure(
        label=label,
        knobs=knobs.to_dict(),
        end_to_end=[r.end_to_end.examples_per_sec for r in results],
        pipeline_only=[r.pipeline_only.examples_per_sec for r in results if r.pipeline_only],
        compute_only=[r.compute_only.examples_per_sec for r in results if r.compute_only],
        cpu_percent=[r.cpu.mean_percent for r in results if r.cpu is not None],
        peak_rss_bytes=max((o.peak_rss_bytes for o in outcomes), default=0),
        failures=[_failure(o) for o in outcomes if o.status is not TrialStatus.COMPLETE],
        restart_s=[cost.seconds_per_restart for cost in restarts],
        restart_stage=restarts[0].stage if restarts else None,
        epoch_steps=restarts[0].epoch_steps if restarts else None,
        weighted_wait=[cost.weighted_wait_fraction for cost in restarts],
        compute_slowdown=[r.compute_slowdown for r in results if r.compute_slowdown is not None],
    )


def _failure(outcome: TrialOutcome) -> str:
    return f"{outcome.status.value}: {outcome.reason}"


def _describe(outcome: TrialOutcome) -> str:
    if outcome.status is TrialStatus.COMPLETE and outcome.result is not None:
        return f"{outcome.result.end_to_end.examples_per_sec:,.0f} examples/s"
    return f"{outcome.status.value}: {outcome.reason.splitlines()[0] if outcome.reason else ''}"


def _key(knobs: Knobs) -> str:
    return json.dumps(knobs.to_dict(), sort_keys=True)
