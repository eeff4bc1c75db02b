"""The benchmark runner: statistics, goals and report by equality; a real smoke run."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.answer_record import ProfileAgainstTune, TimeSplit
from benchmarks.emulated_step_record import EmulatedStepRow
from benchmarks.generated_record import KnownTruthCheck
from benchmarks.goals import (
    check_autotune,
    check_convergence,
    check_geomean,
    check_limit,
    check_overhead,
    check_ram_budget,
    check_repeatability,
    check_training,
    turns_rate,
)
from benchmarks.lock_wait_record import LockWaitRow, lock_wait_section, plateau
from benchmarks.measure import with_remeasured
from benchmarks.offload_record import OffloadResult, OffloadRow
from benchmarks.record import (
    BenchRecord,
    Failure,
    Figure,
    Machine,
    ModelFigures,
    Overhead,
    OverheadRow,
    PipelineRecord,
    Repeatability,
    TrainingChoice,
    Trial,
    Tuning,
    chosen_rate,
    chosen_trial,
    coefficient_of_variation,
    convergence,
    first_within,
    geomean,
    median,
    ratio,
    shared_cpu_bound,
    single_figure_convergence,
    spread,
)
from benchmarks.render import render
from benchmarks.suite import SUITE, Settings, SuiteError, select
from benchmarks.torch_script_record import TorchScript
from tests.deadlines import HANG_S
from tfperf.results.tune import Measurement

REPO = Path(__file__).resolve().parents[1]
BASE = {"batch_size": 32, "num_parallel_calls": 1, "prefetch": 0}
AUTO = {"batch_size": 32, "num_parallel_calls": -1, "prefetch": -1}
TUNED = {"batch_size": 64, "num_parallel_calls": 4, "prefetch": 2}


# -- first trial within 5% of the final best -------------------------------------------------


def test_first_within_finds_the_first_trial_near_the_final_best():
    assert first_within([100.0, None, 190.0, 200.0]) == 2  # 190 >= 0.95 * 200


def test_first_within_counts_exactly_five_percent_and_not_below():
    assert first_within([95.0, 100.0]) == 0
    assert first_within([94.9, 100.0]) == 1


def test_first_within_when_the_first_trial_is_the_best():
    assert first_within([300.0, 100.0, None, 200.0]) == 0


def test_first_within_without_any_figure():
    assert first_within([None, None]) is None
    assert first_within([]) is None


def test_first_within_takes_its_tolerance():
    assert first_within([80.0, 90.0, 100.0], tolerance=0.25) == 0


# -- statistics ------------------------------------------------------------------------------


def test_spread_is_half_range_over_median():
    assert spread([90.0, 100.0, 120.0]) == pytest.approx(0.15)
    assert spread([100.0]) == 0.0


def test_ratio_of_medians_with_summed_spreads():
    found = ratio([200.0, 210.0, 190.0], [100.0, 102.0, 98.0])
    assert found is not None
    assert found.value == pytest.approx(2.0)
    assert found.spread == pytest.approx(0.07)
    assert found.significant
    assert ratio([], [1.0]) is None


def test_coefficient_of_variation():
    assert coefficient_of_variation([98.0, 100.0, 102.0]) == pytest.approx(0.02)
    assert coefficient_of_variation([100.0]) is None


def test_shared_cpu_bound():
    assert shared_cpu_bound(300.0, 600.0) == pytest.approx(200.0)
    assert shared_cpu_bound(0.0, 600.0) is None


# -- a small record ---------------------------------------------------------------------------


def figure(label, knobs, end_to_end, pipeline_only=(), compute_only=(), peak=1 << 30):
    return Figure(
        label=label,
        knobs=knobs,
        end_to_end=list(end_to_end),
        pipeline_only=list(pipeline_only),
        compute_only=list(compute_only),
        cpu_percent=[190.0],
        peak_rss_bytes=peak,
    )


def pipeline_record(**changes):
    trials = [
        Trial(0, "complete", 100.0, 10.0, "baseline"),
        Trial(1, "complete", 200.0, 20.0, "autotune"),
        Trial(2, "complete", 390.0, 25.0, "tfperf's estimate"),
        Trial(3, "pruned", None, 40.0),
        Trial(4, "ram-budget", None, 50.0),
        Trial(5, "complete", 400.0, 60.0),
    ]
    fields = {
        "name": "demo",
        "bottleneck": "a sleepy map",
        "expectation": "Parallel calls help.",
        "beyond_autotune": False,
        "steps": 30,
        "repeats": 3,
        "tuning": Tuning(
            trials_budget=6,
            steps=30,
            wall_s=90.0,
            search_s=60.0,
            ram_budget_bytes=2 << 30,
            trials=trials,
            best_label="trial 5",
            recommendation="Use trial 5's knobs.",
            changes_training=["batch_size"],
            model=ModelFigures(
                limit=600.0,
                bound_by="cpu",
                explanation="2 usable cores bind; more cores would lift it.",
                predicted=420.0,
                measured=390.0,
                trial=2,
                search_gain_estimate="estimate",
                search_gain=1.03,
                search_gain_spread=0.04,
                search_gain_significant=False,
            ),
            training=TrainingChoice(
                input_only="tfperf's estimate",
                fastest="trial 5",
                gain=1.3,
                spread=0.01,
                significant=True,
            ),
        ),
        "baseline": figure("baseline", BASE, [100.0, 100.0, 100.0]),
        "autotune": figure("autotune", AUTO, [190.0, 200.0, 210.0]),
        "tuned": figure("tuned", TUNED, [400.0, 400.0, 400.0], [1000.0] * 3, [2000.0] * 3),
    }
    fields.update(changes)
    return PipelineRecord(**fields)


def bench_record():
    return BenchRecord(
        command="python -m benchmarks --only demo",
        started_at="2025-01-02 03:04 UTC",
        wall_s=600.0,
        smoke=False,
        machine=Machine(
            cpu_model="Test CPU",
            cpu_count=2,
            total_ram_bytes=8 << 30,
            bf16_flags=["avx512_bf16"],
            platform="Linux",
            python_version="3.11.7",
            tensorflow_version="2.21.0",
            tfperf_version="0.1.0",
        ),
        settings={"trials": 6, "seed": 0, "finalists": 3, "rounds": 3, "repeats": 3},
        pipelines=[pipeline_record()],
        repeatability=Repeatability("demo", TUNED, [98.0, 100.0, 102.0]),
        overhead=Overhead(
            instrumentation_us_per_step=2.0,
            sampler_us_per_sample=100.0,
            sampler_interval_ms=50.0,
            steps=150,
            repeats=7,
            rows=[
                OverheadRow(
                    workload="fast step",
                    steps=150,
                    step_ms_bare=1.0,
                    step_ms_profiled=1.005,
                    overhead_pct=0.5,
                    overhead_no_probes_pct=0.25,
                    spread_bare_pct=1.0,
                    spread_profiled_pct=1.5,
                    instrumentation_pct=0.2,
                )
            ],
        ),
    )


EXPECTED = """\
# tfperf benchmarks

tfperf against each pipeline's hand-written baseline, tf.data's AUTOTUNE and the limit tfperf's \
pipeline model states, measured side by side on one machine. Generated by `python -m \
benchmarks`; do not edit: re-render a saved run with `python -m benchmarks --render \
benchmarks/RESULTS.json`.

- Command: `python -m benchmarks --only demo`
- Date: 2025-01-02 03:04 UTC; the run took 10.0 min
- Trial budget: 6 trials per pipeline (seed 0), then tfperf's re-measurement of 3 finalists and \
both references over 3 rounds
- Final figures: baseline, AUTOTUNE and tuned, 3 interleaved repeats each, every repeat a fresh \
process; shown as median ± spread (half the range over the median)

## Machine

| CPU | cores | RAM | bf16 units | TensorFlow | tfperf | Python | platform |
| --- | --- | --- | --- | --- | --- | --- | --- |
| Test CPU | 2 | 8 GiB | avx512_bf16 | 2.21.0 | 0.1.0 | 3.11.7 | Linux |

## Throughput (examples/s)

The limit is tfperf's own, stated by its pipeline model from the study's baseline trial, its \
CPU roofline restated with the input's CPU per example measured at the fastest reference \
trial (docs/limit.md, "The refit"): the smallest of the compute-only rate, the CPU \
roofline and any stage that cannot run in parallel, and `bound by` names which. It is stated \
under the tuned configuration's training setting: where the tuned configuration changes the \
batch size or the precision, the model alone was timed under that setting in the baseline \
trial, and the limit under the baseline's own setting follows in brackets. A ratio's ± is \
the sum of its two figures' relative spreads times the ratio; one marked (noise) holds 1 within \
it. AUTOTUNE stands for each pipeline's second reference: PyTorch's rule (num_workers = cores) \
for a DataLoader.

| pipeline | baseline | AUTOTUNE | tuned | limit | bound by | tuned/baseline | tuned/AUTOTUNE | \
tuned/limit |
| --- | --- | --- | --- | --- | --- | --- | --- | --- |
| demo | 100 ± 0% | 200 ± 5% | 400 ± 0% | 600 | cpu | 4.00x ± 0.00 | 2.00x ± 0.10 | 67% |

Geometric mean of tuned/AUTOTUNE over the pipelines: 2.00x.

## The model's estimates

tfperf's estimate is the configuration its pipeline model predicts best, measured as the \
study's third trial; where the model alone, timed under the batch sizes and precisions the \
search may choose (and the shuffle buffer a restarting dataset refills), predicts a training \
setting faster beyond the noise, a second estimate under that setting is the fourth. The last \
of them runs again with the input's computing stages on the cores it spends at the predicted \
rate and a prefetch of 2 (a pool the model prices only by the cores it holds: its prediction is \
the estimate's it varies, held to what that many cores of input deliver, so its measured figure \
beside that one's shows what the pool did). Where another training setting is \
predicted within the model's error of the second's, that runner-up is measured next, in the \
same shape. Predicted vs measured shows the model's error. Measured is the re-measured median \
(for the model's best estimate, the one confirmed beside the tuned configuration; the trial's \
figure when it was not a finalist).

| pipeline | estimate | predicted | measured | measured/predicted | what binds the limit |
| --- | --- | --- | --- | --- | --- |
| demo | input only | 420 | 390 (trial 3) | 93% | 2 usable cores bind; more cores would lift \
it. |

What the search added to the model's best estimate: the tuned configuration over it, both \
measured again side by side after tfperf chose (so neither figure is the luckiest of several \
medians, and the machine's drift falls on both alike).

- **demo**: 1.03x ± 0.04 over estimate, within the noise: the search found nothing the estimate \
had not.

## Tuning

Trials to 5%: the first trial (counting from 1; trial 1 is the baseline, 2 AUTOTUNE, 3 tfperf's \
estimate, 4 its estimate with training changed where the model proposes one, then the last \
estimate with its input on the cores it spends where no stage blocks) whose \
configuration came within 5% of the study's final best: the median of the configuration the \
study chose, from the windows it measured after choosing it by its finalists' re-measured \
medians (the highest of several medians is biased high; the chosen one's own selection median is \
not a fair bar). Each trial counts by its re-measured median where the \
study measured it again (its finalists and references), else by its single trial figure; the \
goals table also gives the count by single figures alone where it differs (one 1-second window \
swings ~14% between processes on this machine). Search: the trials; tune: the whole `tfperf \
tune`, its re-measurement of the finalists included. Chosen: tfperf's own label, whose trial \
numbers count from 0 as Optuna's do.

| pipeline | budget | trials to 5% | time to 5% | search | tune | chosen | trial outcomes |
| --- | --- | --- | --- | --- | --- | --- | --- |
| demo | 6 trials of 30 steps | 3 | 25 s | 60 s | 90 s | trial 5 (the 6th) | 4 complete, 1 \
pruned, 1 ram-budget |

Each study's trials in order (examples/s; in brackets a re-measured median; `p` pruned, `x` \
failed or over a budget):

- demo: 100 200 390 p x 400

## Does the recommendation change training?

The input-only rule: tfperf recommends the best configuration that leaves training as written \
(batch size, shuffle buffer, precision) unless one that changes training beats it by at least \
1.2x, beyond the noise; then both are shown.

- **demo**: yes, batch_size: trial 5 beats the best input-only configuration (tfperf's \
estimate) by 1.30x ± 0.01, beyond the noise and the 1.2x margin.

## Peak host RAM

The highest RSS of a run's whole process tree over its repeats (TensorFlow itself is most of it).

| pipeline | RAM budget per trial | baseline | AUTOTUNE | tuned |
| --- | --- | --- | --- | --- |
| demo | 2 GiB | 1 GiB | 1 GiB | 1 GiB |

## Goals

| pipeline | goal | measured | met |
| --- | --- | --- | --- |
| demo | tuned >= AUTOTUNE | 2.00x ± 0.10 | yes |
| demo | tuned >= 80% of limit | 67% of 600 | **no** |
| demo | within 5% of best by trial 6 | trial 3 of 6, 0.4 min | yes |
| demo | training changed only beyond noise | changes batch_size (1.30x over tfperf's estimate) \
| yes |
| demo | tuned within the RAM budget | 1 GiB of 2 GiB (1 trial stopped over the budget during \
the search) | yes |
| all | geomean tuned/AUTOTUNE >= 1.5x | 2.00x over 1 pipeline | yes |
| all | profiler overhead < 2% | 0.40% direct | yes |
| demo | repeatability CV < 3% | 2.0% over 3 runs | yes |

### What limits each pipeline (written before the figures)

- **demo** (a sleepy map): Parallel calls help.

### Why a goal was missed

- **demo, tuned >= 80% of limit** (67% of 600): The limit binds on the host's cores, shared by \
input and training (cpu): 2 usable cores bind; more cores would lift it. The tuned \
configuration reaches 67% of it, using 190% of 200% CPU. The cores are saturated, so the gap is \
CPU the model's figures did not count (the runtime's own threads, contention between input and \
training), not a configuration the search missed.

## Profiler overhead

`python -m benchmarks.overhead`: the same loop bare and under `tfperf.Profiler`, interleaved, 7 \
repeats. The direct costs: 2.00 µs of instrumentation per step, and one sampler pass of 100 µs \
every 50 ms (0.20% of one core).

| workload | steps | bare ms/step | profiled ms/step | A/B overhead | without probes | \
instrumentation share |
| --- | --- | --- | --- | --- | --- | --- |
| fast step | 150 | 1.000 | 1.005 | +0.50% (IQR 1.0%/1.5%) | +0.25% | 0.20% |

## Repeatability

The tuned configuration of demo, measured 3 times in a row, each run a fresh process: 98, 100, \
102 examples/s; median 100, coefficient of variation 2.0%.

## Configurations

- **demo** baseline: batch_size=32, num_parallel_calls=1, prefetch=0
  - AUTOTUNE changes: num_parallel_calls 1 -> AUTOTUNE, prefetch 0 -> AUTOTUNE
  - tuned changes: batch_size 32 -> 64, num_parallel_calls 1 -> 4, prefetch 0 -> 2
  - the tuned configuration changes batch_size, which alters training, not only speed
"""


def test_render_is_a_pure_function_of_the_record():
    assert render(bench_record()) == EXPECTED


def test_tuned_equal_to_a_reference_is_marked_in_the_table():
    record = bench_record()
    record.pipelines = [pipeline_record(tuned=figure("tuned", AUTO, [190.0, 200.0, 210.0]))]
    assert "| demo | 100 ± 0% | 200 ± 5% | 200 ± 5% (= AUTOTUNE) |" in render(record)


def test_failed_pipelines_are_listed_with_their_reason():
    record = bench_record()
    record.failures = [Failure("text_classify", "preparing its data failed (crashed): ...")]
    assert (
        "\n## Failed\n\n- **text_classify**: preparing its data failed (crashed): ...\n"
        in render(record)
    )


def test_record_round_trips_through_json(tmp_path):
    record = bench_record()
    loaded = BenchRecord.load(record.save(tmp_path / "results.json"))
    assert loaded == record
    assert render(loaded) == EXPECTED


# -- goals -----------------------------------------------------------------------------------


def test_tuned_within_noise_of_autotune_meets_the_plain_goal():
    record = pipeline_record(tuned=figure("tuned", TUNED, [195.0, 200.0, 205.0]))
    check = check_autotune(record)
    assert check.met is True and check.measured == "1.00x ± 0.08"


def test_where_autotune_cannot_reach_a_gain_within_noise_is_a_miss_with_a_reason():
    record = pipeline_record(
        beyond_autotune=True, tuned=figure("tuned", TUNED, [195.0, 200.0, 205.0])
    )
    check = check_autotune(record)
    assert check.met is False
    assert "differs from AUTOTUNE in batch_size 32 -> 64" in check.note
    assert "smaller than this machine's run-to-run noise" in check.note


def test_tuned_equal_to_autotune_says_so():
    record = pipeline_record(
        beyond_autotune=True, tuned=figure("tuned", AUTO, [190.0, 200.0, 210.0])
    )
    assert "chose the AUTOTUNE configuration itself" in check_autotune(record).note


def _with_model(**changes):
    record = pipeline_record()
    model = ModelFigures(**{**record.tuning.model.__dict__, **changes})
    record.tuning = Tuning(**{**record.tuning.__dict__, "model": model})
    return record


def test_limit_miss_with_idle_cores_names_the_binding_resource_and_the_search():
    record = _with_model(limit=1000.0, bound_by="sequential-stage", explanation="A generator.")
    record.tuned = figure("tuned", TUNED, [400.0] * 3)
    record.tuned.cpu_percent = [100.0]
    check = check_limit(record, cpu_count=2)
    assert check.met is False and check.measured == "40% of 1,000"
    assert check.note.startswith(
        "The limit binds on a stage that cannot run in parallel (sequential-stage): A generator."
    )
    assert "The cores are not saturated, so part of the gap is left by the search" in check.note


def _cpu_bound_miss(
    end_to_end: float,
    input_alone: float,
    model_alone: float,
    cpu_percent: float = 130.0,
    python_stage: str | None = None,
) -> PipelineRecord:
    """A CPU-bound limit of 1,000 examples/s, tuned at these three phases' rates."""
    record = _with_model(
        limit=1000.0, bound_by="cpu", explanation="Cores.", python_stage=python_stage
    )
    record.tuned = figure("tuned", TUNED, [end_to_end] * 3, [input_alone] * 3, [model_alone] * 3)
    record.tuned.cpu_percent = [cpu_percent]
    return record


def test_an_unsaturated_miss_whose_input_alone_stops_short_says_the_input_binds():
    check = check_limit(_cpu_bound_miss(600.0, 650.0, 4000.0), cpu_count=2)

    # Alone the input delivers 650, 65% of the limit: below the 80% goal line on its own.
    assert check.met is False
    assert "its input alone delivers 650 examples/s (65% of the limit)" in check.note
    assert "the input stops short of the goal even with the cores to itself" in check.note


def test_an_unsaturated_miss_whose_input_alone_reaches_the_goal_places_it_in_the_overlap():
    check = check_limit(_cpu_bound_miss(700.0, 900.0, 1500.0), cpu_count=2)

    # Taking turns gives 1 / (1/900 + 1/1500) = 562; 700 lies between it and the limit.
    assert check.met is False
    assert "its input alone delivers 900 examples/s (90% of the limit)" in check.note
    assert "between taking turns (562) and sharing every core at once" in check.note


def test_an_unsaturated_miss_states_how_much_the_step_slows_beside_the_input():
    record = _cpu_bound_miss(700.0, 900.0, 1500.0)
    record.tuned.compute_slowdown = [1.5, 1.6, 1.7]
    check = check_limit(record, cpu_count=2)

    # 1.6x the compute-only time per example at 700 examples/s: 1.6 * 700 / 1500 = 75% of the
    # end-to-end time is the step computing. Stated, not counted as explaining the miss.
    assert check.met is False
    assert check.note.endswith(
        " Beside the input, the model's step computes 1.6x as long per example as alone (75% "
        "of the end-to-end time is the step computing) while the cores are 130% of 200% busy: "
        "running together costs the step more than the CPU time the input takes, which the "
        'limit does not count (docs/limit.md, "What the limit does not count", traces it to '
        "the step's threads queueing for the cores)."
    )


def test_a_step_that_barely_slows_beside_the_input_adds_nothing_to_a_miss():
    slowed = _cpu_bound_miss(700.0, 900.0, 1500.0)
    slowed.tuned.compute_slowdown = [1.1]
    unmeasured = _cpu_bound_miss(700.0, 900.0, 1500.0)

    assert check_limit(slowed, cpu_count=2).note == check_limit(unmeasured, cpu_count=2).note
    assert "Beside the input" not in check_limit(slowed, cpu_count=2).note


def test_an_unsaturated_miss_below_taking_turns_says_they_do_not_overlap():
    check = check_limit(_cpu_bound_miss(700.0, 900.0, 40000.0), cpu_count=2)

    # Taking turns gives 1 / (1/900 + 1/40000) = 880, more than 5% above 700.
    assert check.met is False
    assert "no faster than taking turns (880): they do not overlap" in check.note


def test_a_miss_with_a_python_stage_idle_cores_and_a_short_input_names_the_lock():
    record = _cpu_bound_miss(600.0, 650.0, 4000.0, python_stage="map(fetch)")
    check = check_limit(record, cpu_count=2)

    assert check.met is True and check.measured == "60% of 1,000"
    assert check.note.startswith(
        "The gap is Python's interpreter lock: `map(fetch)` calls Python, so its threads queue"
    )
    assert "the tuned input alone delivers 650 examples/s (65% of the limit)" in check.note
    assert "using 130% of 200% CPU: the cores wait on the lock" in check.note


def test_idle_cores_at_the_taking_turns_rate_are_not_called_the_cores_binding():
    # 1 / (1/780 + 1/4000) = 653, the tuned rate, but at 140% of 200% CPU the cores are idle.
    record = _cpu_bound_miss(650.0, 780.0, 4000.0, cpu_percent=140.0, python_stage="map(fetch)")
    check = check_limit(record, cpu_count=2)

    assert turns_rate(record) == pytest.approx(653.0, rel=0.01)
    assert "The cores' time per example binds" not in check.note
    assert check.met is True and check.note.startswith("The gap is Python's interpreter lock")

    record = _cpu_bound_miss(650.0, 780.0, 4000.0, cpu_percent=140.0)
    check = check_limit(record, cpu_count=2)
    assert check.met is False and "The cores' time per example binds" not in check.note
    assert "the input stops short of the goal even with the cores to itself" in check.note


def test_the_lock_explains_no_miss_where_the_cores_are_busy_or_the_input_alone_is_fast():
    python = "map(fetch)"
    saturated = _cpu_bound_miss(600.0, 650.0, 4000.0, cpu_percent=190.0, python_stage=python)
    fast_input = _cpu_bound_miss(600.0, 900.0, 1500.0, python_stage=python)
    no_python = _cpu_bound_miss(600.0, 650.0, 4000.0)
    assert check_limit(saturated, cpu_count=2).met is False  # the cores bind, not the lock
    assert check_limit(fast_input, cpu_count=2).met is False  # it reaches the goal line alone
    assert check_limit(no_python, cpu_count=2).met is False  # no stage calls Python


def test_a_limit_miss_explained_by_the_restart_is_met_with_the_restart_named():
    record = _with_model(limit=1000.0, bound_by="cpu", explanation="Cores.")
    record.tuned = figure("tuned", {**TUNED, "batch_size": 64}, [600.0] * 3)
    record.tuned.restart_s, record.tuned.epoch_steps = [0.48, 0.48], 15
    record.tuned.restart_stage = "shuffle(2048)"
    check = check_limit(record, cpu_count=2)

    # An epoch is 15 x 64 examples at 600/s = 1.6 s, of which 0.48 s refills: 30%. The rest
    # runs at 60% / 70% = 86% of the limit, past the goal.
    assert check.met is True and check.measured == "60% of 1,000"
    assert "the rest of the epoch runs at 86% of the limit" in check.note
    assert "waits 0.48 s while `shuffle(2048)` refills: 30% of the tuned epoch's time" in (
        check.note
    )
    assert "repeat() before the shuffle" in check.note


def test_a_refill_longer_than_the_gap_states_no_steady_rate_above_the_limit():
    # 0.96 s of a 1.6 s epoch refills: the rest would run at 150% of the limit, which no
    # steady rate does; the note says the refill outweighs the gap instead.
    record = _with_model(limit=1000.0, bound_by="cpu", explanation="Cores.")
    record.tuned = figure("tuned", {**TUNED, "batch_size": 64}, [600.0] * 3)
    record.tuned.restart_s, record.tuned.epoch_steps = [0.96], 15
    check = check_limit(record, cpu_count=2)
    assert check.met is True
    assert "of the limit" not in check.note.split(". Each epoch")[0]
    assert "the refill holds more of the epoch than the gap" in check.note


@pytest.mark.parametrize("refill_s", [0.05, 0.32])
def test_a_restart_that_leaves_the_rest_of_the_epoch_short_does_not_excuse_a_miss(refill_s):
    """A refill of 3% or 20% of the epoch at 60% of the limit: the rest of the epoch runs at
    62% or 75%, still short of the goal, so the restart is not the reason."""
    record = _with_model(limit=1000.0, bound_by="cpu", explanation="Cores.")
    record.tuned = figure("tuned", {**TUNED, "batch_size": 64}, [600.0] * 3)
    record.tuned.restart_s, record.tuned.epoch_steps = [refill_s], 15
    check = check_limit(record, cpu_count=2)
    assert check.met is False and "The gap is the restart" not in check.note


def test_a_cpu_bound_miss_where_input_and_training_take_turns_is_met_with_both_rates_named():
    record = _with_model(limit=1000.0, bound_by="cpu", explanation="Cores.")
    record.tuned = figure("tuned", TUNED, [390.0, 400.0, 410.0], [500.0] * 3, [2000.0] * 3)
    check = check_limit(record, cpu_count=2)

    # Taking turns: 1 / (1/500 + 1/2000) = 400, the tuned median; the input is 80% of a turn.
    assert check.met is True and check.measured == "40% of 1,000"
    assert "taking turns on the cores they give 1 / (1/500 + 1/2,000) = 400" in check.note
    assert "less CPU per example in the input, 80% of each turn" in check.note


def test_taking_turns_excuses_only_a_cpu_bound_miss_it_accounts_for():
    record = _with_model(limit=1000.0, bound_by="cpu", explanation="Cores.")
    record.tuned = figure("tuned", TUNED, [300.0] * 3, [500.0] * 3, [2000.0] * 3)
    assert turns_rate(record) is None  # 300 is 25% below the 400 taking turns gives
    assert check_limit(record, cpu_count=2).met is False

    record = _with_model(limit=1000.0, bound_by="compute", explanation="The step.")
    record.tuned = figure("tuned", TUNED, [400.0] * 3, [500.0] * 3, [2000.0] * 3)
    assert turns_rate(record) == pytest.approx(400.0)
    assert check_limit(record, cpu_count=2).met is False


def test_limit_met_at_eighty_percent():
    assert check_limit(_with_model(limit=500.0), cpu_count=2).met is True


def test_a_record_without_a_model_has_no_limit_figure():
    record = pipeline_record()
    record.tuning = Tuning(**{**record.tuning.__dict__, "model": None})
    assert check_limit(record, cpu_count=2).met is None


def test_a_large_autotune_goal_is_judged_on_the_ratio_and_a_miss_cites_the_limit():
    record = pipeline_record(autotune_goal=5.0)
    check = check_autotune(record)
    assert check.goal == "tuned >= 5x AUTOTUNE" and check.met is False
    assert "The limit is 600 examples/s (cpu), 3.0x AUTOTUNE: even the limit is below 5x" in (
        check.note
    )
    record.tuned = figure("tuned", TUNED, [1000.0] * 3)
    assert check_autotune(record).met is True


def test_late_convergence_says_how_far_the_estimate_was():
    trials = [Trial(n, "complete", 100.0 + n, 30.0 * (n + 1)) for n in range(8)]
    trials.append(Trial(8, "complete", 500.0, 270.0))
    record = _with_model(trial=2)
    record.tuning = Tuning(**{**record.tuning.__dict__, "trials": trials, "best_label": "trial 8"})
    check = check_convergence(record)
    assert check.met is False
    assert check.measured == "trial 9 of 9, 4.5 min"
    assert "The study's best came late (trial 9). The estimate (trial 3) reached 20%" in (
        check.note
    )
    assert "the model's thread counts or training setting were off" in check.note


def test_late_convergence_counts_the_second_estimate_and_calls_a_near_miss_noise():
    trials = [Trial(n, "complete", 100.0 + n, 30.0 * (n + 1)) for n in range(8)]
    trials[3] = Trial(3, "complete", 472.0, 120.0)  # 94.4% of the chosen 500: just outside 5%
    trials.append(Trial(8, "complete", 500.0, 270.0))
    record = _with_model(trial=2, second_trial=3)
    record.tuning = Tuning(**{**record.tuning.__dict__, "trials": trials, "best_label": "trial 8"})
    check = check_convergence(record)
    assert check.met is False
    assert (
        "The estimate (trial 3) reached 20% of the final best, its estimate with training "
        "changed (trial 4) 94%: within a single trial's noise"
    ) in check.note
    record = _with_model(trial=2, second_trial=None)
    record.tuning = Tuning(
        **{**record.tuning.__dict__, "trials": trials, "best_label": "trial 8"},
    )
    record.tuning.changes_training = ["batch_size"]
    assert "the model proposed no estimate with training changed" in (
        check_convergence(record).note
    )


def test_late_convergence_judges_the_shortfall_by_the_re_measured_spreads():
    # image_decode in the bench at bfdb38e: the estimate at 88% of the chosen configuration.
    trials = [Trial(n, "complete", 100.0 + n, 30.0 * (n + 1)) for n in range(8)]
    trials[2] = Trial(2, "complete", 440.0, 90.0, "estimate", remeasured=440.0)
    trials.append(Trial(8, "complete", 500.0, 270.0, remeasured=500.0, selected=520.0))
    record = _with_model(trial=2)

    def note(estimate_spread: float, chosen_spread: float) -> str:
        trials[2] = dataclasses.replace(trials[2], remeasured_spread=estimate_spread)
        trials[8] = dataclasses.replace(trials[8], remeasured_spread=chosen_spread)
        record.tuning = Tuning(
            **{**record.tuning.__dict__, "trials": trials, "best_label": "trial 8"}
        )
        return check_convergence(record).note

    noisy = note(0.05, 0.04)
    assert "The estimate (trial 3) reached 88% of the final best" in noisy
    assert ": within the measured noise of the goal's 5%" in noisy
    assert "re-measured spreads add up to ±9%" in noisy
    quiet = note(0.01, 0.02)
    assert "short by more than the two figures' re-measured spreads (±3% together)" in quiet
    assert "the model's thread counts or training setting were off" in quiet


def test_with_remeasured_keeps_each_measurement_s_spread():
    trials = [Trial(n, "complete", 100.0, 10.0) for n in range(2)]
    measured = Measurement("trial 1", 1, {}, [90.0, 100.0, 110.0], 0, None)
    figures = with_remeasured(trials, [measured])
    assert [t.remeasured_spread for t in figures] == [None, pytest.approx(0.1)]


def test_the_pooled_estimate_is_a_row_of_the_model_section_and_counts_in_a_late_note():
    trials = [Trial(n, "complete", 100.0 + n, 30.0 * (n + 1)) for n in range(8)]
    trials[4] = Trial(4, "complete", 460.0, 150.0)
    trials.append(Trial(8, "complete", 500.0, 270.0))
    record = _with_model(trial=2, second_trial=3, pooled_pool=1, pooled_trial=4)
    record.tuning.model.pooled_measured = 460.0
    record.tuning = Tuning(**{**record.tuning.__dict__, "trials": trials, "best_label": "trial 8"})
    note = check_convergence(record).note
    assert "its pooled estimate (trial 5) 92%: within a single trial's noise" in note
    bench = bench_record()
    bench.pipelines = [record]
    assert "| demo | the same, input on a pool of 1 | 420 | 460 (trial 5) | 110% |" in (
        render(bench)
    )


def test_the_runner_up_is_a_row_of_the_model_section_and_counts_in_a_late_note():
    trials = [Trial(n, "complete", 100.0 + n, 30.0 * (n + 1)) for n in range(8)]
    trials[6] = Trial(6, "complete", 480.0, 150.0)
    trials.append(Trial(8, "complete", 500.0, 270.0))
    runner = {"runner_up_predicted": 390.0, "runner_up_measured": 480.0, "runner_up_trial": 6}
    setting = ["batch_size 256", "mixed_precision mixed_bfloat16"]
    record = _with_model(trial=2, second_trial=3, runner_up_setting=setting, **runner)
    record.tuning = Tuning(**{**record.tuning.__dict__, "trials": trials, "best_label": "trial 8"})
    note = check_convergence(record).note
    assert "its runner-up (trial 7) 96%: within a single trial's noise" in note
    bench = bench_record()
    bench.pipelines = [record]
    row = (
        "| demo | the same under the runner-up: batch_size 256, mixed_precision mixed_bfloat16 "
        "| 390 | 480 (trial 7) | 123% |"
    )
    assert row in render(bench)


def test_a_search_gain_beyond_noise_is_stated_and_none_means_the_estimate_was_the_answer():
    bench = bench_record()
    record = _with_model(search_gain=1.2, search_gain_spread=0.05, search_gain_significant=True)
    bench.pipelines = [record]
    assert "- **demo**: 1.20x ± 0.06 over estimate.\n" in render(bench)
    bench.pipelines = [_with_model(search_gain=None, search_gain_estimate=None)]
    assert "- **demo**: the answer is the model's own estimate.\n" in render(bench)


def test_a_training_change_within_noise_is_a_miss_and_none_is_met():
    record = pipeline_record()
    choice = TrainingChoice("tfperf's estimate", "trial 5", 1.03, 0.05, False)
    record.tuning = Tuning(**{**record.tuning.__dict__, "training": choice})
    check = check_training(record)
    assert check.met is False and "within noise" in check.note
    record.tuning = Tuning(**{**record.tuning.__dict__, "changes_training": []})
    kept = check_training(record)
    assert kept.met is True and kept.note == "trial 5 changes training for 1.03x, within the noise"
    assert "- **demo**: no: trial 5 changes training and is faster by 1.03x ± 0.05" in render(
        dataclasses.replace(bench_record(), pipelines=[record])
    )


def test_a_change_to_training_beyond_the_noise_but_short_of_the_margin_says_so():
    """A 1.18x ± 0.04 gain was rendered "within the noise"; it was short of the margin."""
    record = pipeline_record()
    choice = TrainingChoice("tfperf's estimate", "trial 5", 1.18, 0.03, True)
    record.tuning = Tuning(**{**record.tuning.__dict__, "training": choice, "changes_training": []})
    short = "beyond the noise but short of the 1.2x a change to training must clear"
    assert check_training(record).note == f"trial 5 changes training for 1.18x, {short}"
    assert (
        f"- **demo**: no: trial 5 changes training and is faster by 1.18x ± 0.04, {short}, so "
        "the input-only tfperf's estimate is recommended."
    ) in render(dataclasses.replace(bench_record(), pipelines=[record]))


def test_a_gain_just_short_of_the_margin_is_not_rounded_up_to_it():
    """A run printed "faster by 1.20x ± 0.06, ... short of the 1.2x": the gain was 1.198."""
    record = pipeline_record()
    choice = TrainingChoice("tfperf's estimate", "trial 6", 1.198, 0.05, True)
    record.tuning = Tuning(**{**record.tuning.__dict__, "training": choice, "changes_training": []})
    assert check_training(record).note.startswith("trial 6 changes training for 1.198x, beyond")
    assert "is faster by 1.198x ± 0.06, beyond the noise but short of the 1.2x" in render(
        dataclasses.replace(bench_record(), pipelines=[record])
    )
    assert TrainingChoice("a", "b", 1.18).gain_words == "1.18x"
    assert TrainingChoice("a", "b", 1.2).gain_words == "1.20x"


def test_a_faster_larger_change_to_training_passed_over_is_named_with_its_ratio():
    record = pipeline_record()
    choice = TrainingChoice("tfperf's estimate", "trial 5", 2.1, 0.05, True, "trial 18", 1.04)
    record.tuning = Tuning(**{**record.tuning.__dict__, "training": choice})
    assert check_training(record).met is True
    assert (
        "beyond the noise and the 1.2x margin. trial 18 (the fastest when the choice was "
        "made, 1.04x the "
        "recommendation's reported figure) changes training more, within the noise: the "
        "smaller change is recommended."
    ) in render(dataclasses.replace(bench_record(), pipelines=[record]))


def test_geomean_of_tuned_over_autotune():
    slow = pipeline_record(tuned=figure("tuned", TUNED, [220.0] * 3), name="slow")
    check = check_geomean([pipeline_record(), slow])
    assert geomean([2.0, 1.1]) == pytest.approx(1.4832, abs=1e-4)
    assert check.met is False and check.measured == "1.48x over 2 pipelines"
    assert "(slow within 1.2x)" in check.note


def test_ram_budget_broken_by_the_final_runs_is_a_miss():
    tuned = figure("tuned", TUNED, [400.0], peak=3 << 30)
    check = check_ram_budget(pipeline_record(tuned=tuned))
    assert check.met is False and check.measured == "3 GiB of 2 GiB"


def test_overhead_judged_on_direct_costs_and_cross_checked_by_ab():
    overhead = bench_record().overhead
    assert check_overhead(overhead).met is True
    row = overhead.rows[0]
    contradicted = Overhead(
        **{**overhead.__dict__, "rows": [OverheadRow(**{**row.__dict__, "overhead_pct": 5.0})]}
    )
    check = check_overhead(contradicted)
    assert check.met is False and "differ by more than their spread" in check.note


def test_repeatability_miss_is_explained():
    check = check_repeatability(Repeatability("demo", TUNED, [90.0, 100.0, 110.0]))
    assert check.met is False and check.measured == "10.0% over 3 runs"
    assert "Longer runs (`--steps`)" in check.note


# -- the suite -------------------------------------------------------------------------------


def test_every_suite_pipeline_file_exists_and_names_are_unique():
    assert len({spec.name for spec in SUITE}) == len(SUITE) >= 6
    assert all(spec.path.is_file() for spec in SUITE)


def test_unknown_pipeline_name_lists_the_choices():
    with pytest.raises(SuiteError, match=r"no benchmark pipeline named 'imgae'; choose from"):
        select(["imgae"])


def test_settings_are_checked():
    with pytest.raises(SuiteError, match=r"`repeats >= 1` must hold, but got repeats=0"):
        Settings(repeats=0)


def test_an_existing_study_is_refused(tmp_path):
    (tmp_path / "remote_storage.db").write_text("")
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--smoke", "--studies", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "would resume an old study instead of starting fresh" in done.stderr


# -- the smoke run ---------------------------------------------------------------------------


@pytest.mark.tf
def test_smoke_run_measures_and_renders(tmp_path):
    """`make bench-smoke`: one pipeline, the two reference trials, every figure once."""
    output = tmp_path / "RESULTS.md"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "--smoke",
            "--output",
            str(output),
            "--studies",
            str(tmp_path / "studies"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=HANG_S,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    record = BenchRecord.load(tmp_path / "RESULTS.json")
    assert record.smoke and [p.name for p in record.pipelines] == ["remote_storage"]
    pipeline = record.pipelines[0]
    assert pipeline.baseline.end_to_end and pipeline.tuned.end_to_end
    assert pipeline.tuned.pipeline_only and pipeline.tuned.compute_only
    assert len(pipeline.tuned.compute_slowdown) == len(pipeline.tuned.end_to_end)
    assert all(slowdown > 0 for slowdown in pipeline.tuned.compute_slowdown)
    assert [t.reference for t in pipeline.tuning.trials] == ["baseline", "autotune"]
    assert record.repeatability is not None and len(record.repeatability.end_to_end) == 2
    assert record.overhead is not None and record.overhead.rows
    split = pipeline.tuning.split
    assert split is not None and (split.completed, split.stopped) == (2, 0)
    assert split.phases_s > 0 and split.startup_s > 0 and split.remeasure_runs > 0
    assert record.commit is not None
    text = output.read_text(encoding="utf-8")
    assert text == render(record)
    assert "\n## Time to an answer\n" in text and "\n| remote_storage |" in text


def test_restart_cost_is_reported_for_pipelines_that_restarted():
    record = bench_record()
    assert "## Restart cost" not in render(record)
    restarted = figure("baseline", {}, [100.0, 110.0])
    restarted.restart_s = [2.5, 2.25, 2.75]
    restarted.restart_stage = "shuffle(2048)"
    restarted.epoch_steps = 32
    restarted.weighted_wait = [0.4, 0.5, 0.45]
    record.pipelines = [pipeline_record(name="finite_shuffle", baseline=restarted)]

    assert (
        "| finite_shuffle | baseline | 2.50 (median of 3) | `shuffle(2048)` | 32 steps | 45% |"
        in render(record)
    )


def test_without_re_measurement_the_final_best_is_the_chosen_configurations_trial_figure():
    rates = [100.0, 150.0, 400.0, 390.0, 330.0, 300.0, 420.0]
    trials = [Trial(n, "complete", rate, 30.0 * (n + 1)) for n, rate in enumerate(rates)]
    assert first_within([t.examples_per_sec for t in trials]) == 2
    assert chosen_rate(_tuned(trials, "trial 3")) == 390.0
    assert first_within([t.examples_per_sec for t in trials], best=390.0) == 2
    trials[2] = Trial(2, "complete", 400.0, 90.0, reference="estimate")
    assert chosen_rate(_tuned(trials, "estimate")) == 400.0
    assert chosen_rate(_tuned(trials, "trial 99")) is None


def test_a_trial_counts_by_its_re_measured_median_and_the_bar_is_the_chosen_ones_median():
    # The estimate (trial 3) drew a low window, 300, and re-measured 385; the chosen trial 7
    # drew a lucky 420 and re-measured 395: the estimate was within 5% all along.
    rates = [100.0, 150.0, 300.0, 250.0, 330.0, 310.0, 420.0]
    trials = [Trial(n, "complete", rate, 30.0 * (n + 1)) for n, rate in enumerate(rates)]
    trials[2] = dataclasses.replace(trials[2], reference="estimate", remeasured=385.0)
    trials[6] = dataclasses.replace(trials[6], remeasured=395.0)
    tuning = _tuned(trials, "trial 6")
    assert chosen_rate(tuning) == 395.0
    assert convergence(tuning) == 2
    assert single_figure_convergence(tuning) == 6
    record = _with_model(trial=2)
    record.tuning = Tuning(**{**record.tuning.__dict__, "trials": trials, "best_label": "trial 6"})
    check = check_convergence(record)
    assert check.met is True
    assert check.measured == "trial 3 of 7, 1.5 min (by single trial figures: trial 7)"
    bench = bench_record()
    bench.pipelines = [record]
    assert f"- {record.name}: 100 150 300 [385] 250 330 310 420 [395]" in render(bench)


def _tuned(trials: list[Trial], label: str, **changes: float) -> Tuning:
    """A 60 s tune of `trials` that chose `label`."""
    return Tuning(len(trials), 25, 60.0, 50.0, None, trials, label, "", [], **changes)


def test_a_chosen_variant_no_trial_ran_counts_by_its_confirmed_median():
    # tfperf chose trial 6's knobs with its precision reverted: no trial ran that, so its
    # confirmed median is the bar, and no trial's figure stands in for it.
    rates = [100.0, 150.0, 300.0, 250.0, 330.0, 310.0, 420.0]
    trials = [Trial(n, "complete", rate, 30.0 * (n + 1)) for n, rate in enumerate(rates)]
    label = "trial 6 with mixed_precision as written"
    tuning = _tuned(trials, label, chosen_median=310.0, chosen_spread=0.02)
    assert chosen_trial(trials, label) is None
    assert chosen_rate(tuning) == 310.0
    assert convergence(tuning) == 2 and single_figure_convergence(tuning) == 2
    record = _with_model(trial=2)
    record.tuning = dataclasses.replace(record.tuning, **tuning.__dict__)
    bench = bench_record()
    bench.pipelines = [record]
    row = f"| 7 trials of 25 steps | 3 | 90 s | 50 s | 60 s | {label} | 7 complete |"
    assert row in render(bench)


def test_the_studys_re_measured_medians_land_on_the_trials_that_ran_them():
    trials = [Trial(n, "complete", 100.0 * (n + 1), 30.0) for n in range(3)]
    measured = [
        Measurement("trial 2", 2, {}, [290.0, 310.0, 300.0], 0, None),
        Measurement("estimate", None, {}, [50.0], 0, None),  # a label with no trial
    ]
    assert [t.remeasured for t in with_remeasured(trials, measured)] == [None, None, 300.0]


def test_the_chosen_configuration_counts_by_its_confirmed_median_and_keeps_its_selection():
    trials = [Trial(n, "complete", 100.0 * (n + 1), 30.0) for n in range(3)]
    chosen = Measurement("trial 2", 2, {}, [320.0, 330.0, 340.0], 0, None, [300.0, 296.0, 304.0])
    other = Measurement("trial 1", 1, {}, [280.0, 290.0, 285.0], 0, None)
    figures = with_remeasured(trials, [chosen, other])
    assert [t.remeasured for t in figures] == [None, 285.0, 300.0]
    assert [t.selected for t in figures] == [None, None, 330.0]
    # Trial 2 (285) is within 5% of the confirmed 300, not of the 330 it was chosen on.
    assert convergence(_tuned(figures, "trial 2")) == 1


def test_without_re_measured_medians_a_trial_counts_by_its_single_figure():
    trials = [Trial(n, "complete", rate, 30.0) for n, rate in enumerate([100.0, 380.0, 400.0])]
    assert convergence(_tuned(trials, "trial 2")) == 1
    trials[1] = dataclasses.replace(trials[1], remeasured=370.0)
    assert convergence(_tuned(trials, "trial 2")) == 2  # its median, 92.5% of 400, is what counts


def test_tuned_beyond_the_limit_and_its_noise_is_called_the_models_error():
    record = _with_model(trial=2)
    assert record.tuning.model is not None
    record.tuning.model.limit = median(record.tuned.end_to_end) / 1.3
    check = check_limit(record, cpu_count=2)
    assert check.met is True
    assert check.measured.startswith("130% of")
    assert "the model's limit is not a bound here" in check.note


# -- the zero-change row ---------------------------------------------------------------------


def zero_change_record(patched=(380.0, 400.0, 420.0), manual_edits=()):
    """A run with remote_storage's contract file (4x tuned/baseline) and its plain twin."""
    from benchmarks.zero_change_record import RatioFigure, ZeroChange

    record = bench_record()
    record.pipelines = [pipeline_record(name="remote_storage")]
    record.zero_change = ZeroChange(
        contract="remote_storage",
        pipeline="remote_storage_plain.py",
        trials=20,
        steps=25,
        best_label="trial 7",
        claimed=RatioFigure(4.0, 0.05),
        verified=RatioFigure(3.9, 0.06),
        verify_problem=None,
        diff=(
            "--- ./remote_storage_plain.py\n+++ ./remote_storage_plain.py\n@@ -21,1 +21,1 @@\n"
            "-    ds = keys.map(fetch, num_parallel_calls=1)\n"
            "+    ds = keys.map(fetch, num_parallel_calls=32)\n"
        ),
        manual_edits=list(manual_edits),
        original=[100.0, 100.0, 100.0],
        patched=list(patched),
    )
    return record


def test_the_zero_change_section_sets_the_twin_beside_its_contract_file():
    text = render(zero_change_record())

    assert "\n## Zero-change hand-over\n\nThe plain-file twin of remote_storage (" in text
    assert (
        "| contract file `remote_storage.py`: tuned / baseline (measured here) | 4.00x ± 0% |\n"
        "| plain file `remote_storage_plain.py`: tuned / baseline (claimed by tfperf tune) | "
        "4.00x ± 5% |\n"
        "| plain file: patched / original (tfperf's verified hand-over) | 3.90x ± 6% |\n"
        "| plain file: patched / original (measured here) | 4.00x ± 5% (100 → 400 examples/s) |"
    ) in text
    assert "The edits in the patch:\n\n```diff\n--- ./remote_storage_plain.py\n" in text
    assert "+    ds = keys.map(fetch, num_parallel_calls=32)\n```" in text
    assert (
        "| zero-change | patched/original within noise of the claimed gain | "
        "4.00x vs claimed 4.00x (noise ±10%) | yes |"
    ) in text


def test_a_patch_that_misses_the_claimed_gain_is_a_miss_with_a_reason():
    from benchmarks.render_zero_change import check_zero_change

    record = zero_change_record(patched=[100.0, 102.0, 104.0], manual_edits=["Add by hand ..."])
    assert record.zero_change is not None

    check = check_zero_change(record.zero_change)

    assert (check.met, check.measured) == (False, "1.02x vs claimed 4.00x (noise ±7%)")
    assert check.note.startswith(
        "The patched file runs 74% below the gain tfperf claimed: the patch does not hold all "
        "of what the winner measured. tfperf left 1 edit(s) to do by hand"
    )
    text = render(record)
    assert "| zero-change | patched/original within noise of the claimed gain |" in text
    assert "- **zero-change, patched/original within noise of the claimed gain**" in text
    assert "Left to do by hand:\n\n- Add by hand ..." in text


def test_a_zero_change_row_without_a_measurement_says_why():
    from benchmarks.render_zero_change import check_zero_change

    record = zero_change_record(patched=[])
    assert record.zero_change is not None
    record.zero_change.problem = "tfperf wrote no patch: no configuration beat your code"

    check = check_zero_change(record.zero_change)

    assert (check.met, check.note) == (None, record.zero_change.problem)
    assert "No side-by-side measurement: tfperf wrote no patch" in render(record)


def test_a_record_with_the_zero_change_row_round_trips_through_json(tmp_path):
    record = zero_change_record()
    loaded = BenchRecord.load(record.save(tmp_path / "results.json"))
    assert loaded == record
    assert render(loaded) == render(record)


def test_the_bench_records_the_recommended_change_and_the_one_passed_over():
    from benchmarks.measure import training_choice
    from tests.report.helpers import measured, tune_result
    from tfperf.results.tune import Speedup

    parallel = measured("estimate", [2000.0, 2000.0], batch_size=32, num_parallel_calls=8)
    smaller = measured("estimate-training", [4000.0, 4000.0], batch_size=128)
    larger = measured("trial 18", [4200.0, 4200.0], batch_size=128, shuffle_buffer=4096)
    result = dataclasses.replace(
        tune_result(gain_over_input_only=Speedup(2.0, 0.0, True)),
        best=smaller,
        input_only=parallel,
        fastest=larger,
        changes_training=["batch_size"],
    )
    assert training_choice(result) == TrainingChoice(
        "estimate", "estimate-training", 2.0, 0.0, True, "trial 18", pytest.approx(1.05)
    )


def test_the_emulated_step_rows_render_side_by_side_and_round_trip(tmp_path):
    record = bench_record()
    record.emulated_step = [
        EmulatedStepRow(0.001, 0.8, 0.86, 0.82, 0.0057, 0.00513),
        EmulatedStepRow(0.020, 0.0, 0.02, 0.0, 0.00705, 0.00634),
    ]
    text = render(record)
    assert "## Emulated accelerator step" in text
    assert "| 1 ms | 0.80 | 0.86 | 0.82 | 5.70 ms | 5.13 ms |" in text
    assert "| 20 ms | 0.00 | 0.02 | 0.00 | 7.05 ms | 6.34 ms |" in text
    assert BenchRecord.load(record.save(tmp_path / "results.json")) == record
    assert "Emulated accelerator step" not in render(bench_record())


LOCK_ROWS = [
    LockWaitRow(71, 9401.0, 143.0, 2.11, 4.74),
    LockWaitRow(4, 1243.0, 20.0, 0.08, 0.09),
    LockWaitRow(32, 9100.0, 125.0, 0.29, 0.64),
    LockWaitRow(128, 9165.0, 144.0, 5.19, 11.54),
]


def test_the_lock_rows_render_by_thread_count_and_round_trip(tmp_path):
    record = bench_record()
    record.lock_wait = LOCK_ROWS
    text = render(record)

    table = text.split("## The interpreter lock on latency-bound reads")[1]
    assert table.index("| 4 | 1,243 | 20% | 3.22 ms | 0.08 ms | 0.09 ms |") < table.index(
        "| 128 | 9,165 | 144% | 13.97 ms | 5.19 ms | 11.54 ms |"
    )
    # 9,100 at 32 threads is within 5% of the fastest (9,401), and 71 and 128 came after it.
    assert (
        "From 32 threads on, more threads add no rate beyond the noise (5%): 9,100 examples/s "
        "at 32, 9,165 at 128, with the CPU at 144% of 200%"
    ) in table
    assert "grows from 0.29 ms to 5.19 ms: the threads queue for the lock, not for the cores" in (
        table
    )
    assert BenchRecord.load(record.save(tmp_path / "results.json")) == record
    assert "The interpreter lock" not in render(bench_record())


def test_the_lock_section_says_where_the_rate_stops_rising_only_when_it_was_seen_to():
    rising = [row for row in LOCK_ROWS if row.threads <= 32]
    assert plateau(rising) is None  # 32, the fastest, is also the most threads measured
    assert "more threads add no rate" not in lock_wait_section(rising, 2, 180.0)
    assert plateau(LOCK_ROWS) == LOCK_ROWS[2]
    assert plateau([]) is None

    busy = lock_wait_section(LOCK_ROWS, 2, 140.0)  # 144% counts as busy cores here
    assert "more threads add no rate" in busy and "not for the cores" not in busy


def test_the_offload_table_sets_prediction_against_measurement_and_checks_the_bar():
    from benchmarks.offload import table

    data = {
        "predicted_per_worker_examples_per_sec": 1000.0,
        "verify": [
            {"workers": 1, "cores_per_worker": 1, "examples_per_sec": 900.0},
            {"workers": 2, "cores_per_worker": 1, "examples_per_sec": 1600.0},
        ],
        "workers_needed": 12,
        "binds": "workers",
    }
    lines, met = table(data)
    assert lines[1:3] == [
        "      1           1,000            900                0.90",
        "      2           2,000          1,600                0.80",
    ]
    assert met
    assert not table({**data, "workers_needed": 1})[1]


def test_the_offload_rows_render_in_the_results_and_round_trip(tmp_path):
    record = bench_record()
    record.offload = OffloadResult(
        workers_needed=12,
        binds="workers",
        rows=[OffloadRow(1, 1000.0, 900.0), OffloadRow(2, 2000.0, 1600.0)],
    )
    text = render(record)
    assert "## Offload to tf.data service" in text
    assert "| 1 | 1,000 | 900 | 0.90 |" in text and "| 2 | 2,000 | 1,600 | 0.80 |" in text
    assert "`workers_needed`: 12; binds: workers; bar met: yes." in text
    assert (
        "| offload | workers needed >= 2, 1 worker within 0.6-1.5x of the prediction | needs 12; "
        "1 worker at 0.90x the prediction | yes |"
    ) in text
    assert BenchRecord.load(record.save(tmp_path / "results.json")) == record
    record.offload.rows[0].measured_examples_per_sec = 400.0  # 0.4x: outside the band
    assert "bar met: **no**." in render(record)
    assert "Offload to tf.data service" not in render(bench_record())


# -- the commit, the known-truth family, the PyTorch script --------------------------------


def test_the_header_names_the_commit_and_marks_a_dirty_tree():
    record = bench_record()
    record.commit = "abc1234"
    assert "\n- Commit: `abc1234`\n" in render(record)
    record.commit = "abc1234+dirty"
    assert "\n- Commit: `abc1234`, with uncommitted changes in the working tree\n" in render(record)
    assert "Commit:" not in render(bench_record())


def test_the_commit_is_read_from_this_checkout():
    from benchmarks.command import _commit

    commit = _commit()
    assert commit is not None and re.fullmatch(r"[0-9a-f]{4,}(\+dirty)?", commit)


def known_truth_checks():
    return [
        KnownTruthCheck("four_files", "verdict", "input-bound", "input-bound", True),
        KnownTruthCheck("four_files", "limiting stage", "map(decode)", "batch", False),
        KnownTruthCheck("deep_prefetch", "verdict", "compute-bound", "compute-bound", True),
    ]


def test_the_known_truth_checks_render_per_member_with_every_miss_and_round_trip(tmp_path):
    record = bench_record()
    record.known_truth = known_truth_checks()
    text = render(record)
    assert "## Known-truth family" in text
    assert "2 of 3 checks passed on 2 pipelines." in text
    assert "| four_files | 1 of 2 | limiting stage |" in text
    assert "| deep_prefetch | 1 of 1 | none |" in text
    assert "- **four_files**, limiting stage: expected map(decode), found batch" in text
    assert "| known truth | every known-truth check passes | 2 of 3 | **no** |" in text
    assert BenchRecord.load(record.save(tmp_path / "results.json")) == record
    assert "Known-truth family" not in render(bench_record())


def _fake_child(monkeypatch, module, writes):
    """`module`'s subprocess.run writes what its child would (`writes(command)`) and exits 1,
    as a child whose checks missed does."""

    def run(command, **kwargs):
        writes(command)
        return subprocess.CompletedProcess(command, 1, "", "")

    monkeypatch.setattr(module.subprocess, "run", run)


def test_a_known_truth_family_with_misses_is_still_read(monkeypatch):
    import json

    import benchmarks.child as child
    import benchmarks.generated_record as generated_record

    def writes(command):
        path = Path(command[command.index("--json") + 1])
        rows = [dataclasses.asdict(check) for check in known_truth_checks()]
        path.write_text(json.dumps(rows), encoding="utf-8")

    _fake_child(monkeypatch, child, writes)
    assert generated_record.run_known_truth(lambda _: None) == known_truth_checks()


def test_a_known_truth_family_without_checks_fails_with_its_output(monkeypatch):
    import benchmarks.child as child
    import benchmarks.generated_record as generated_record

    _fake_child(monkeypatch, child, lambda command: None)
    with pytest.raises(
        RuntimeError, match="the known-truth family wrote nothing \\(exit status 1\\)"
    ):
        generated_record.run_known_truth(lambda _: None)


def torch_script():
    return TorchScript(
        trials=20,
        rounds=3,
        original=[70.0, 73.0, 76.0],
        patched=[450.0, 460.0, 470.0],
        goal=2.0,
        diff="--- ./torch_train.py\n+++ ./torch_train.py\n",
    )


def test_the_pytorch_script_renders_as_written_against_patched_and_round_trips(tmp_path):
    record = bench_record()
    record.torch_script = torch_script()
    text = render(record)
    assert "## Zero-change PyTorch script" in text
    assert "| original | 3 | 73 |" in text and "| patched | 3 | 460 |" in text
    assert "Patched / original: 6.30x ± 0.40; the goal: at least 2x; met: yes." in text
    assert "| zero-change | script patched/original >= 2x | 6.30x ± 6% | yes |" in text
    assert BenchRecord.load(record.save(tmp_path / "results.json")) == record
    record.torch_script.patched = [100.0, 110.0, 120.0]
    assert "met: **no**." in render(record)
    assert "Zero-change PyTorch script" not in render(bench_record())


def test_the_pytorch_script_s_result_is_read_whatever_its_exit_status(monkeypatch, tmp_path):
    import json

    import benchmarks.torch_script_record as torch_script_record

    def writes(command):
        out = Path(command[command.index("--out") + 1])
        data = {**dataclasses.asdict(torch_script()), "ratio": 6.3, "spread": {}}
        (out / "result.json").write_text(json.dumps(data), encoding="utf-8")

    _fake_child(monkeypatch, torch_script_record, writes)
    assert torch_script_record.run_torch_script(20, tmp_path, lambda _: None) == torch_script()


# -- time to an answer ----------------------------------------------------------------------


def _stored(status, wall_s=None, result=None, role=None, seconds=0.0):
    """A finished trial as a study stores it, `seconds` from its start to its end."""
    import datetime

    import optuna

    from tfperf.study.records import TrialRecord

    attrs = TrialRecord(status=status, wall_s=wall_s, result=result).to_user_attrs()
    if role is not None:
        attrs["role"] = role
    trial = optuna.trial.create_trial(state=optuna.trial.TrialState.FAIL, user_attrs=attrs)
    trial.datetime_start = datetime.datetime(2025, 1, 2, 3, 4, 0)
    trial.datetime_complete = trial.datetime_start + datetime.timedelta(seconds=seconds)
    return trial


def test_a_study_s_time_splits_into_start_up_windows_stopped_trials_and_re_measurement():
    from benchmarks.answer import split_of
    from tests.fakes.trials import fake_result
    from tfperf.knobs import Knobs
    from tfperf.results import TrialStatus

    phase = fake_result(Knobs(), wait_s=0.02).end_to_end
    result = fake_result(Knobs(), wait_s=0.02)
    result = dataclasses.replace(result, pipeline_only=phase, compute_only=None)
    trials = [
        _stored(TrialStatus.COMPLETE, 10.0, result.to_json(indent=None), seconds=11.0),
        _stored(TrialStatus.PRUNED, 3.0, seconds=3.5),
        # A copy of a measured configuration ran no process: its figures, no wall time.
        _stored(TrialStatus.COMPLETE, None, result.to_json(indent=None)),
        _stored(TrialStatus.LOCK, role="remeasure", seconds=40.0),
    ]
    split = split_of(trials, remeasure_runs=6, wall_s=60.0)
    assert (split.completed, split.stopped) == (1, 1)
    warmup, measured = phase.warmup.duration_s, phase.duration_s
    assert (warmup, measured) == (pytest.approx(0.06), pytest.approx(0.18))
    # Two phases (end to end, and the pipeline alone), each with its warm-up and its window.
    assert split.warmup_s == pytest.approx(2 * warmup)
    assert split.phases_s == pytest.approx(2 * measured)
    assert split.stages_s == 0.0
    assert split.startup_s == pytest.approx(10.0 - 2 * warmup - 2 * measured)
    assert (split.stopped_s, split.remeasure_s, split.remeasure_runs) == (3.0, 40.0, 6)
    assert split.rest_s == pytest.approx(60.0 - 10.0 - 3.0 - 40.0)


def time_split(wall_s=90.0):
    return TimeSplit(
        wall_s=wall_s,
        completed=5,
        stopped=1,
        startup_s=20.0,
        warmup_s=4.0,
        phases_s=15.0,
        stages_s=6.0,
        stopped_s=3.0,
        remeasure_s=30.0,
        remeasure_runs=9,
    )


def test_time_to_an_answer_renders_each_tune_s_split_and_the_side_by_side_figure(tmp_path):
    record = bench_record()
    assert "## Time to an answer" not in render(record)
    record.pipelines[0].tuning.split = time_split()
    record.profile_against_tune = ProfileAgainstTune(
        "examples/quickstart/pipeline.py", 8, 60.0, 300.0, time_split(300.0)
    )
    text = render(record)
    assert "## Time to an answer" in text
    assert "| demo | 90 s | 25 s | 20 (4.0) | 4 | 15 | 6 | 3 (1) | 30 (9) | 12 |" in text
    assert "| quickstart, 8 trials | 5.0 min | n/a | 20 (4.0) |" in text
    assert "took 5.0 min: **5.0x** the profile's time" in text
    assert "The goal: at most 6x; met: yes." in text
    assert (
        "| quickstart | tune --trials 8 <= 6x one profile | 5.0x (5.0 min vs 60 s) | yes |" in text
    )
    assert BenchRecord.load(record.save(tmp_path / "results.json")) == record
    record.profile_against_tune.tune_s = 420.0
    assert "**7.0x** the profile's time" in render(record)
    assert "met: **no**." in render(record)


def test_dataloader_pipelines_have_their_own_table_with_pytorch_s_rule():
    record = bench_record()
    loader = pipeline_record(name="loader", reference="PyTorch's rule")
    record.pipelines = [pipeline_record(), loader]
    text = render(record)
    head = text.index("### DataLoader pipelines")
    assert "| demo | 100 ± 0% |" in text[:head]
    header = (
        "| pipeline | baseline | PyTorch's rule | tuned | limit | bound by | tuned/baseline | "
        "tuned/rule | tuned/limit |"
    )
    assert header in text[head:]
    assert "| loader | 100 ± 0% | 200 ± 5% |" in text[head:]
    assert "Geometric mean of tuned/AUTOTUNE over the pipelines: 2.00x." in text[head:]
    record.pipelines = [loader]
    only = render(record)
    assert "## Throughput (examples/s)\n\nThe PyTorch DataLoader pipelines" in only
    assert "### DataLoader pipelines" not in only


def test_the_extras_run_in_a_full_run_only():
    from benchmarks.command import _parser, _settings

    def extras(*arguments):
        return _settings(_parser().parse_args(list(arguments))).extras

    assert extras() and extras("--only", "remote_storage")
    assert not extras("--smoke") and not extras("--no-extras")
