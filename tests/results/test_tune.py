"""Speed-ups with their noise, and the TuneResult JSON round trip."""

from __future__ import annotations

import pytest

from tests.report.helpers import trial_number
from tfperf.results.tune import Measurement, Objective, Speedup, TuneResult, speedup


def measured(label, values, knobs=None):
    knobs = knobs or {"batch_size": 64}
    return Measurement(label, trial_number(label), knobs, values, 1 << 30, None)


def test_median_and_spread():
    m = measured("a", [90.0, 100.0, 120.0])
    assert m.median == 100.0
    assert m.spread == pytest.approx(0.15)  # half of (120 - 90) over 100
    assert measured("b", [50.0]).spread == 0.0


def test_gain_beyond_noise_is_significant():
    result = speedup(measured("new", [200.0, 210.0, 190.0]), measured("old", [100.0, 102.0, 98.0]))
    assert result.ratio == pytest.approx(2.0)
    assert result.spread == pytest.approx(0.07)
    assert result.significant
    assert result.describe() == "2.00x ± 0.14"


def test_gain_within_noise_is_not_a_gain():
    result = speedup(measured("new", [104.0, 130.0, 80.0]), measured("old", [100.0, 101.0, 99.0]))
    assert result.ratio == pytest.approx(1.04)
    assert not result.significant
    assert "within noise: not a measured gain" in result.describe()


def test_round_trip():
    best, base = measured("trial 3", [200.0, 190.0]), measured("baseline", [100.0, 98.0])
    result = TuneResult(
        pipeline="p.py",
        study_name="p",
        storage="sqlite:///x.db",
        objective=Objective.THROUGHPUT,
        best=best,
        baseline=base,
        autotune=None,
        candidates=[best, base],
        speedup_vs_baseline=speedup(best, base),
        speedup_vs_autotune=None,
        recommendation="Use it.",
        changes_training=[],
        pareto_trials=[],
        trial_counts={"complete": 5},
        trials_this_run=5,
        wall_s=12.5,
        ram_budget_bytes=1 << 30,
        gpu_memory_budget_bytes=None,
    )
    again = TuneResult.from_dict(result.to_dict())
    assert again == result
    assert isinstance(again.speedup_vs_baseline, Speedup)


def _measured(label, knobs, values):
    return Measurement(label, trial_number(label), knobs, values, 0, None)


def test_input_only_rule_keeps_training_when_the_change_gains_within_noise():
    from tfperf.results.tune import input_only_choice

    baseline = _measured("baseline", {"batch_size": 32, "num_parallel_calls": 1}, [100.0, 102.0])
    parallel = _measured("trial 3", {"batch_size": 32, "num_parallel_calls": 8}, [200.0, 210.0])
    bigger = _measured("trial 5", {"batch_size": 64, "num_parallel_calls": 8}, [206.0, 226.0])

    choice = input_only_choice([baseline, parallel, bigger], baseline)

    assert choice.best is parallel and choice.input_only is parallel
    assert choice.fastest is bigger
    assert choice.gain is not None and not choice.gain.significant


def test_input_only_rule_recommends_a_change_to_training_beyond_noise_and_names_both():
    from tfperf.results.tune import input_only_choice, recommend, speedup, training_changes

    baseline = _measured("baseline", {"batch_size": 32, "num_parallel_calls": 1}, [100.0, 101.0])
    parallel = _measured("trial 3", {"batch_size": 32, "num_parallel_calls": 8}, [200.0, 201.0])
    bigger = _measured("trial 5", {"batch_size": 64, "num_parallel_calls": 8}, [400.0, 401.0])

    choice = input_only_choice([baseline, parallel, bigger], baseline)

    assert choice.best is bigger and choice.input_only is parallel and choice.fastest is None
    assert choice.gain is not None and choice.gain.significant
    changes = training_changes(bigger, baseline)
    text = recommend(bigger, speedup(bigger, baseline), changes, choice.input_only, choice.gain)
    assert "batch_size" in text and "trial 3's knobs is the best" in text


def test_a_change_to_training_must_clear_the_margin_beyond_the_noise():
    from tfperf.results.tune import input_only_choice, recommend, speedup, training_changes

    # The case: halving the batch for 1.06x over the best input-only configuration.
    baseline = _measured("baseline", {"batch_size": 4, "num_parallel_calls": 1}, [100.0, 101.0])
    parallel = _measured("trial 3", {"batch_size": 4, "num_parallel_calls": 8}, [200.0, 201.0])
    halved = _measured("trial 11", {"batch_size": 2, "num_parallel_calls": 8}, [212.0, 213.0])
    choice = input_only_choice([baseline, parallel, halved], baseline)

    assert choice.best is parallel and choice.fastest is halved
    assert choice.gain is not None and choice.gain.significant
    text = recommend(parallel, speedup(parallel, baseline), [], parallel, choice.gain, halved)
    assert "short of the margin a change to training must clear" in text
    # A margin of 1 takes any gain beyond the noise; 1.5x clears the default 1.2.
    assert input_only_choice([baseline, parallel, halved], baseline, 1.0).best is halved
    faster = _measured("trial 12", {"batch_size": 2, "num_parallel_calls": 8}, [300.0, 301.0])
    assert input_only_choice([baseline, parallel, faster], baseline).best is faster
    assert training_changes(faster, baseline) == ["batch_size"]


def test_when_the_baseline_is_the_best_input_only_the_recommendation_names_it_plainly():
    from tfperf.results.tune import input_only_choice, recommend, speedup, training_changes

    baseline = _measured("baseline", {"batch_size": 32}, [100.0, 101.0])
    bigger = _measured("trial 5", {"batch_size": 64}, [400.0, 401.0])
    choice = input_only_choice([baseline, bigger], baseline)
    assert choice.input_only is baseline

    changes = training_changes(bigger, baseline)
    text = recommend(bigger, speedup(bigger, baseline), changes, choice.input_only, choice.gain)
    assert "Leaving training as written, your baseline is the best" in text


def test_an_input_only_best_within_the_noise_of_the_baseline_is_not_called_the_best():
    from tfperf.results.tune import input_only_choice, recommend, speedup, training_changes

    # A compute-bound script's tune: AUTOTUNE's median read below the baseline's, both within
    # the noise, and a precision change gained 1.7x.
    baseline = _measured("baseline", {"mixed_precision": "float32"}, [2_523.0, 2_060.0])
    autotune = _measured(
        "autotune", {"mixed_precision": "float32", "prefetch": -1}, [2_528.0, 2_001.0]
    )
    bf16 = _measured("trial 3", {"mixed_precision": "mixed_bfloat16"}, [3_880.0, 3_916.0])
    choice = input_only_choice([baseline, autotune, bf16], baseline)
    changes = training_changes(bf16, baseline)
    text = recommend(bf16, speedup(bf16, baseline), changes, autotune, choice.gain, None, baseline)
    assert "no configuration beat your baseline beyond the noise" in text
    assert "is the best" not in text
    faster = _measured("trial 4", {"mixed_precision": "float32", "prefetch": 2}, [3_000.0] * 2)
    text = recommend(bf16, speedup(bf16, baseline), changes, faster, choice.gain, None, baseline)
    assert "Leaving training as written, trial 4's knobs is the best" in text


def test_a_configuration_stopped_over_a_memory_budget_is_never_recommended():
    import dataclasses

    from tfperf.results.tune import input_only_choice

    baseline = _measured("baseline", {"batch_size": 32, "shuffle_buffer": 64}, [100.0, 101.0])
    least = _measured("estimate-pool", {"batch_size": 64, "shuffle_buffer": 64}, [300.0, 302.0])
    halved = _measured("trial 15", {"batch_size": 64, "shuffle_buffer": 32}, [301.0, 303.0])
    # The smaller change wins while both stayed within the budget (in_memory, bench at 941fc5d)
    assert input_only_choice([baseline, least, halved], baseline).best is least

    over = dataclasses.replace(least, over_budget=1)
    choice = input_only_choice([baseline, over, halved], baseline)

    assert choice.best is halved and choice.fastest is None
    assert not over.within_budgets and halved.within_budgets


def test_the_baseline_stays_the_reference_when_a_memory_budget_stopped_one_of_its_repeats():
    import dataclasses

    from tfperf.results.tune import input_only_choice

    baseline = dataclasses.replace(
        _measured("baseline", {"batch_size": 32}, [100.0, 101.0]), over_budget=1
    )
    over = _measured("trial 2", {"batch_size": 32, "num_parallel_calls": 4}, [300.0, 301.0])
    over = dataclasses.replace(over, over_budget=2)

    choice = input_only_choice([baseline, over], baseline)

    assert choice.best is baseline and choice.input_only is baseline and choice.fastest is None


def test_input_only_rule_when_the_fastest_keeps_training():
    from tfperf.results.tune import input_only_choice

    baseline = _measured("baseline", {"batch_size": 32}, [100.0])
    choice = input_only_choice([baseline], baseline)
    assert choice.best is baseline and choice.fastest is None and choice.gain is None


def test_confirmed_windows_are_the_reported_figure_and_the_choice_keeps_its_own():
    from tfperf.results.tune import input_only_choice

    baseline = _measured("baseline", {"batch_size": 32, "num_parallel_calls": 1}, [100.0, 100.0])
    lucky = Measurement(
        "trial 3", 3, {"batch_size": 32, "num_parallel_calls": 8}, [220.0, 224.0], 0, None
    )
    lucky.confirmed = [196.0, 204.0]
    steady = _measured("trial 4", {"batch_size": 32, "num_parallel_calls": 4}, [210.0, 212.0])

    assert lucky.median == 200.0 and lucky.spread == pytest.approx(0.02)
    assert lucky.selection_median == 222.0 and lucky.windows == [196.0, 204.0]
    choice = input_only_choice([baseline, lucky, steady], baseline)
    assert choice.best is lucky  # chosen on its selection windows, reported by its confirmed ones
    assert speedup(lucky, baseline).ratio == pytest.approx(2.0)
    assert choice.weighed == [lucky]


def test_a_change_to_training_is_weighed_on_both_sides_confirmed_windows():
    from tfperf.results.tune import input_only_choice

    baseline = _measured("baseline", {"batch_size": 32, "num_parallel_calls": 1}, [100.0, 100.0])
    parallel = _measured("trial 3", {"batch_size": 32, "num_parallel_calls": 8}, [200.0, 200.0])
    bigger = _measured("trial 5", {"batch_size": 64, "num_parallel_calls": 8}, [300.0, 300.0])
    assert input_only_choice([baseline, parallel, bigger], baseline).weighed == [bigger, parallel]

    # Measured again, the change to training gains nothing beyond noise: the input-only wins.
    bigger.confirmed, parallel.confirmed = [200.0, 212.0], [198.0, 204.0]
    choice = input_only_choice([baseline, parallel, bigger], baseline)
    assert choice.best is parallel and choice.fastest is bigger
    assert choice.gain is not None and not choice.gain.significant


def _changers():
    """A baseline, an input-only best, and two changes to training: batch 128 in bf16, and the
    same with a doubled shuffle buffer (compute_bound's winner in the bench at aec454b)."""
    written = {"batch_size": 32, "shuffle_buffer": 1024, "mixed_precision": "float32"}
    baseline = _measured("baseline", {**written, "num_parallel_calls": 1}, [100.0, 101.0])
    parallel = _measured("trial 2", {**written, "num_parallel_calls": 4}, [102.0, 103.0])
    batch = {"batch_size": 128, "mixed_precision": "mixed_bfloat16", "num_parallel_calls": 4}
    estimate = _measured("estimate-training", {**written, **batch}, [216.0, 228.0])
    more = _measured("trial 18", {**written, **batch, "shuffle_buffer": 2048}, [224.0, 242.0])
    return baseline, parallel, estimate, more


def test_of_two_changes_to_training_within_noise_the_smaller_is_recommended():
    from tfperf.results.tune import input_only_choice, recommend, speedup, training_changes

    baseline, parallel, estimate, more = _changers()

    choice = input_only_choice([baseline, parallel, estimate, more], baseline)

    assert choice.best is estimate and choice.input_only is parallel and choice.fastest is more
    assert choice.gain is not None and choice.gain.significant
    assert choice.passed_over is not None and not choice.passed_over.significant
    assert choice.weighed == [estimate, parallel, more]
    changes = training_changes(estimate, baseline)
    assert changes == ["batch_size", "mixed_precision"]
    text = recommend(
        estimate, speedup(estimate, baseline), changes, parallel, choice.gain, choice.fastest
    )
    assert "The fastest, trial 18's knobs, changes training more" in text


def test_a_larger_change_to_training_beyond_noise_of_the_smaller_is_recommended():
    from tfperf.results.tune import input_only_choice

    baseline, parallel, estimate, more = _changers()
    more.examples_per_sec = [300.0, 306.0]

    choice = input_only_choice([baseline, parallel, estimate, more], baseline)

    assert choice.best is more and choice.fastest is None and choice.passed_over is None


def test_a_smaller_change_that_does_not_beat_the_input_only_best_is_not_recommended():
    from tfperf.results.tune import input_only_choice

    baseline, parallel, estimate, more = _changers()
    estimate.examples_per_sec = [100.0, 130.0]  # within noise of the input-only best
    more.examples_per_sec = [128.0, 131.0]

    choice = input_only_choice([baseline, parallel, estimate, more], baseline)

    assert choice.best is more and choice.fastest is None


def test_the_smaller_change_is_chosen_on_selection_windows_not_confirmed_ones():
    from tfperf.results.tune import input_only_choice

    baseline, parallel, estimate, more = _changers()
    # Confirmation moves the fastest's reported figure; which one is smaller stays decided.
    more.confirmed = [400.0, 402.0]

    choice = input_only_choice([baseline, parallel, estimate, more], baseline)

    assert choice.best is estimate and choice.fastest is more


def test_training_distance_counts_doublings_and_a_change_of_precision():
    from tfperf.results.tune import training_distance

    written = {"batch_size": 32, "shuffle_buffer": 1024, "mixed_precision": "float32"}
    assert training_distance(written, written) == 0.0
    assert training_distance({**written, "batch_size": 128}, written) == 2.0
    assert training_distance({**written, "shuffle_buffer": 256}, written) == 2.0
    assert training_distance({**written, "mixed_precision": "mixed_bfloat16"}, written) == 1.0
    site = "shuffle@train.py:7.buffer_size"
    assert training_distance({"sites": {site: 4096}}, {"sites": {site: 1024}}) == 2.0


def test_a_figure_from_one_run_says_its_spread_is_unknown_not_zero():
    one = measured("new", [200.0])
    assert not one.spread_known
    assert measured("old", [100.0, 101.0]).spread_known
    result = speedup(one, measured("old", [100.0, 100.0]))
    assert not result.spread_known
    assert result.describe() == "2.00x (spread unknown: a figure from a single run)"
    assert "± 0.00" not in result.describe()
    old = Speedup(ratio=1.5, spread=0.0, significant=True)  # a result saved before the field
    assert old.spread_known and old.describe() == "1.50x ± 0.00"


def test_a_chosen_configuration_confirmed_slower_keeps_the_baseline():
    # Seen on a custom-loop script: AUTOTUNE chosen on 6,600 examples/s, confirmed at 3,129
    # against the baseline's 3,196, and recommended as "0.98x ± 0.00 your baseline's".
    from tfperf.results.tune import keeps_baseline, recommend

    chosen = measured("autotune", [6681.0, 6492.0, 6711.0])
    chosen.confirmed = [3128.6, 3130.0]
    baseline = measured("baseline", [3185.8, 3206.8])
    vs_baseline = speedup(chosen, baseline)
    assert vs_baseline.significant and vs_baseline.ratio < 1
    assert keeps_baseline(chosen, vs_baseline)
    assert recommend(chosen, vs_baseline, []) == (
        "Keep your baseline: the AUTOTUNE configuration, the one chosen, ran at 0.98x ± 0.00 of "
        "it once confirmed on fresh windows, so no configuration is a measured gain. The runs "
        "that chose it measured 6,492 to 6,711 examples/s, its confirmed ones 3,129 to 3,130: "
        "it ran at two speeds here; tune again with more --rounds to tell which is usual."
    )
