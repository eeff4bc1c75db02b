"""The finalists' re-measurement and the chosen configuration's confirmation, on a fake runner."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fakes.trials import fake_result, outcome
from tfperf.knobs import Knobs
from tfperf.results import TrialOutcome, TrialStatus
from tfperf.results.tune import Measurement
from tfperf.trials import Budgets, TrialRequest
from tfperf.tuner._remeasure import (
    Finalist,
    Repeats,
    best_estimate,
    confirm,
    remeasure,
)

BUDGETS = Budgets(ram_bytes=None, gpu_memory_bytes=None)


def request(knobs: Knobs) -> TrialRequest:
    return TrialRequest(pipeline=Path("p.py"), knobs=knobs, steps=6, min_seconds=0.0)


class Runner:
    """Runs in order; each run's input wait comes from `waits` by call, keyed by map calls."""

    def __init__(self, wait: Callable[[Knobs, int], float | None]) -> None:
        self.wait = wait
        self.calls: list[int] = []

    def __call__(self, req: TrialRequest, budgets: Budgets) -> TrialOutcome:
        self.calls.append(req.knobs.num_parallel_calls)
        wait = self.wait(req.knobs, len(self.calls) - 1)
        if wait is None:
            return outcome(TrialStatus.FAILED, "out of memory")
        result = fake_result(req.knobs, wait)
        return TrialOutcome(TrialStatus.COMPLETE, result, "", 200 * len(self.calls), None, 1.0)


def repeats(rounds: int, runner: Callable[[TrialRequest, Budgets], TrialOutcome]) -> Repeats:
    return Repeats(rounds, request, BUDGETS, runner)


def finalist(label: str, calls: int) -> Finalist:
    return Finalist(label, calls, Knobs(num_parallel_calls=calls))


def test_rounds_rotate_so_drift_hits_every_configuration_alike():
    runner = Runner(lambda knobs, call: 0.01 * knobs.num_parallel_calls)
    remeasure([finalist("a", 1), finalist("b", 2), finalist("c", 3)], repeats(2, runner))
    assert runner.calls == [1, 2, 3, 2, 3, 1]


def test_remeasure_keeps_each_finalists_completed_repeats_in_order():
    runner = Runner(lambda knobs, call: None if call == 0 else 0.01 * knobs.num_parallel_calls)
    measured = remeasure([finalist("a", 1), finalist("b", 2)], repeats(2, runner))
    assert runner.calls == [1, 2, 2, 1]
    assert [m.label for m in measured] == ["a", "b"]
    assert [len(m.examples_per_sec) for m in measured] == [1, 2]  # a's first repeat failed
    assert measured[0].confirmed == [] and measured[0].median == measured[0].selection_median


class OverBudgetOnce(Runner):
    """Every run completes, but finalist `calls`'s `nth` run is stopped over the RAM budget."""

    def __init__(self, calls: int, nth: int) -> None:
        super().__init__(lambda knobs, call: 0.01)
        self.target, self.nth, self.seen = calls, nth, 0

    def __call__(self, req: TrialRequest, budgets: Budgets) -> TrialOutcome:
        if req.knobs.num_parallel_calls == self.target:
            self.seen += 1
            if self.seen == self.nth:
                self.calls.append(self.target)
                return outcome(TrialStatus.RAM_BUDGET, "used 3.26 GiB, over the 3.25 GiB budget")
        return super().__call__(req, budgets)


def test_repeats_a_memory_budget_stopped_are_counted_through_the_confirmation():
    first = remeasure([finalist("a", 1), finalist("b", 2)], repeats(2, OverBudgetOnce(2, 2)))
    a, b = first
    assert (a.over_budget, b.over_budget) == (0, 1)
    assert len(b.examples_per_sec) == 1 and not b.within_budgets

    confirmed = confirm(first, [b], repeats(2, OverBudgetOnce(2, 1)))

    assert confirmed[1].over_budget == 2 and len(confirmed[1].confirmed) == 1
    assert best_estimate([dataclasses.replace(b, label="estimate")]) is None


def test_confirm_measures_only_the_chosen_and_reports_their_fresh_windows():
    first = remeasure(
        [finalist("a", 1), finalist("b", 2), finalist("c", 4)],
        repeats(2, Runner(lambda knobs, call: 0.01)),
    )
    # Confirming windows come out slower than the selection's: the selection was lucky.
    runner = Runner(lambda knobs, call: 0.02)
    confirmed = confirm(first, [first[2], first[0]], repeats(2, runner))
    assert runner.calls == [4, 1, 1, 4]  # interleaved, only the chosen two
    assert [m.label for m in confirmed] == ["a", "b", "c"]
    a, b, c = confirmed
    assert b == first[1]  # not chosen: untouched
    for fresh, before in ((a, first[0]), (c, first[2])):
        assert len(fresh.confirmed) == 2 and fresh.examples_per_sec == before.examples_per_sec
        assert fresh.median < before.median  # the reported figure is the confirmed one
        assert fresh.selection_median == before.median  # the choice's figure is kept
        assert fresh.peak_rss_bytes == max(before.peak_rss_bytes, 800)


def test_a_chosen_configuration_that_fails_every_confirmation_keeps_its_figure():
    first = remeasure([finalist("a", 1)], repeats(2, Runner(lambda knobs, call: 0.01)))
    confirmed = confirm(first, first, repeats(2, Runner(lambda knobs, call: None)))
    assert confirmed[0].confirmed == []
    assert confirmed[0].median == pytest.approx(first[0].median)


def test_confirmed_windows_round_trip_and_old_records_read_without_them():
    m = Measurement("trial 3", 3, {"batch_size": 64}, [100.0, 120.0], 0, None, [90.0, 94.0])
    import dataclasses

    assert Measurement(**dataclasses.asdict(m)) == m
    stored_before = {k: v for k, v in dataclasses.asdict(m).items() if k != "confirmed"}
    assert Measurement(**stored_before).median == 110.0


def test_the_models_best_estimate_is_the_estimate_reference_with_the_highest_selection_median():
    def m(label: str, windows: list[float], confirmed: list[float] | None = None) -> Measurement:
        return Measurement(label, None, {}, windows, 0, None, confirmed or [])

    measured = [
        m("trial 7", [900.0, 950.0]),
        m("estimate", [600.0, 620.0]),
        m("estimate-pool", [800.0, 700.0], confirmed=[500.0]),  # selection median 750 decides
        m("estimate-training", [720.0, 740.0]),
        m("autotune", [880.0]),
    ]
    best = best_estimate(measured)
    assert best is not None and best.label == "estimate-pool"
    assert best_estimate([m("baseline", [100.0]), m("trial 2", [300.0])]) is None


def test_a_short_study_gets_fewer_finalists():
    """Issue 54 item 6: a 6-trial study re-measured 3 searched finalists (and every reference)
    over 3 rounds; the finalists now follow the study's size."""
    from tfperf.tuner._remeasure import finalist_count

    assert [finalist_count(3, trials) for trials in (1, 6, 8, 9, 30)] == [2, 2, 2, 3, 3]
    assert finalist_count(1, 6) == 1  # never more than asked


def test_a_configuration_behind_beyond_the_noise_leaves_the_rounds():
    from tfperf.tuner._remeasure import contenders

    assert contenders([[100.0, 104.0], [90.0, 92.0], [101.0, 99.0]]) == [0, 2]
    assert contenders([[100.0, 101.0], [], [80.0, 85.0]]) == [0]
    assert contenders([[], []]) == []


def test_rounds_stop_once_the_ranking_is_settled_beyond_the_noise():
    """Issue 54 item 6: every finalist ran every round, however far behind it was."""
    runner = Runner(lambda knobs, call: 0.01 * knobs.num_parallel_calls)  # steady figures
    finalists = [finalist("a", 1), finalist("b", 2), finalist("c", 4)]
    measured = remeasure(finalists, repeats(3, runner))
    assert len(runner.calls) == 6  # two rounds of three; the third would reorder nothing
    assert [len(m.examples_per_sec) for m in measured] == [2, 2, 2]


def test_unsettled_rounds_measure_every_finalist_every_round():
    """The figures a report shows (the bench's), not a ranking: a lone configuration too."""
    runner = Runner(lambda knobs, call: 0.01 * knobs.num_parallel_calls)
    finalists = [finalist("a", 1), finalist("b", 2), finalist("c", 4)]
    measured = remeasure(finalists, repeats(3, runner), settle=False)
    assert [len(m.examples_per_sec) for m in measured] == [3, 3, 3]
    alone = remeasure([finalist("a", 1)], repeats(5, runner), settle=False)
    assert len(alone[0].examples_per_sec) == 5


def test_only_the_contenders_run_the_later_rounds():
    # a and b alternate within each other's noise; c is far behind from the first round.
    noise = {1: (0.010, 0.0104), 2: (0.0102, 0.0099), 4: (0.05, 0.05)}
    seen: dict[int, int] = {}

    def wait(knobs: Knobs, call: int) -> float:
        repeat = seen[knobs.num_parallel_calls] = seen.get(knobs.num_parallel_calls, -1) + 1
        return noise[knobs.num_parallel_calls][repeat % 2]

    runner = Runner(wait)
    finalists = [finalist("a", 1), finalist("b", 2), finalist("c", 4)]
    measured = remeasure(finalists, repeats(4, runner))
    assert runner.calls[:6] == [1, 2, 4, 2, 4, 1]  # two full rounds, interleaved
    assert 4 not in runner.calls[6:] and len(runner.calls) == 10  # then a and b alone
    assert [len(m.examples_per_sec) for m in measured] == [4, 4, 2]


def test_confirmation_stops_once_the_chosen_are_apart_beyond_the_noise():
    """Issue 54 item 6: the confirmation ran every round too."""
    first = remeasure(
        [finalist("a", 1), finalist("b", 4)],
        repeats(2, Runner(lambda knobs, call: 0.01 * knobs.num_parallel_calls)),
    )
    runner = Runner(lambda knobs, call: 0.01 * knobs.num_parallel_calls)
    confirmed = confirm(first, first, repeats(3, runner))
    assert len(runner.calls) == 4  # two rounds of two; a third would reorder nothing
    assert [len(m.confirmed) for m in confirmed] == [2, 2]


def _rate(calls: int) -> float:
    """The examples/s the steady runner below measures for `calls` map calls."""
    return fake_result(Knobs(num_parallel_calls=calls), 0.01 * calls).end_to_end.examples_per_sec


def test_after_one_round_a_finalist_its_own_trial_puts_behind_runs_no_more():
    """Issue 56: every finalist ran `MIN_ROUNDS` however far behind its trial and first
    window put it; the baseline still runs them all, since the answer is stated against it."""
    runner = Runner(lambda knobs, call: 0.01 * knobs.num_parallel_calls)  # steady figures
    finalists = [
        dataclasses.replace(finalist("trial 1", 1), prior=_rate(1)),
        dataclasses.replace(finalist("estimate", 2), prior=_rate(2)),
        dataclasses.replace(finalist("baseline", 4), prior=_rate(4), compared=True),
    ]
    measured = remeasure(finalists, repeats(3, runner))
    assert runner.calls == [1, 2, 4, 4]  # the leader alone has nothing to be reordered against
    assert [len(m.examples_per_sec) for m in measured] == [1, 1, 2]


def test_a_trial_within_the_noise_of_the_leader_keeps_its_finalist_in_the_rounds():
    runner = Runner(lambda knobs, call: 0.01 * knobs.num_parallel_calls)
    lucky = dataclasses.replace(finalist("estimate", 2), prior=_rate(1) * 1.01)
    measured = remeasure(
        [dataclasses.replace(finalist("trial 1", 1), prior=_rate(1)), lucky],
        repeats(2, runner),
    )
    assert [len(m.examples_per_sec) for m in measured] == [2, 2]


def test_the_best_input_only_finalist_stays_beside_a_faster_change_to_training():
    """The answer weighs the fastest against the best that leaves training as written, so
    both are ranked on the same rounds while the margin is undecided; the slower input-only
    one leaves."""
    # trial 1 swings 1,850-2,130 examples/s, around 1.2x the estimate's 1,600.
    runner = Runner(_alternating({1: (0.005, 0.0073), 2: (0.010,), 4: (0.04,)}))
    finalists = [
        dataclasses.replace(finalist("trial 1", 1), prior=1850.0, changes_training=True),
        dataclasses.replace(finalist("estimate", 2), prior=1600.0),
        dataclasses.replace(finalist("trial 4", 4), prior=640.0),
    ]
    measured = remeasure(finalists, repeats(2, runner))
    assert runner.calls == [1, 2, 4, 2, 1]
    assert [len(m.examples_per_sec) for m in measured] == [2, 2, 1]


def test_without_its_trials_figure_a_finalist_runs_the_least_rounds():
    """Under two objectives (no `prior`) a finalist far behind in examples/s may still be the
    answer for its RAM: one window is no evidence to drop it on."""
    runner = Runner(lambda knobs, call: 0.01 * knobs.num_parallel_calls)
    measured = remeasure([finalist("a", 1), finalist("b", 4)], repeats(3, runner))
    assert [len(m.examples_per_sec) for m in measured] == [2, 2]


def _alternating(waits: dict[int, tuple[float, ...]]) -> Callable[[Knobs, int], float]:
    """Each configuration (keyed by its map calls) cycles through its own input waits."""
    seen: dict[int, int] = {}

    def wait(knobs: Knobs, call: int) -> float:
        calls = knobs.num_parallel_calls
        seen[calls] = seen.get(calls, -1) + 1
        return waits[calls][seen[calls] % len(waits[calls])]

    return wait


def test_changes_to_training_short_of_the_margin_leave_the_rounds():
    """Issue 56: two changes to training within each other's noise kept the later rounds
    going (and the input-only best beside them), though neither could clear the 1.2x margin
    over the input-only best: ordering them changed no answer."""
    # estimate ~1,600 examples/s; trial 1 and trial 5 ~1,700-1,750, each other's noise.
    runner = Runner(_alternating({2: (0.010,), 1: (0.0085, 0.0090), 5: (0.0088, 0.0083)}))
    finalists = [
        finalist("estimate", 2),
        dataclasses.replace(finalist("trial 1", 1), changes_training=True),
        dataclasses.replace(finalist("trial 5", 5), changes_training=True),
    ]
    measured = remeasure(finalists, repeats(4, runner))
    assert len(runner.calls) == 6  # the two rounds every window-less finalist runs, no more
    assert [len(m.examples_per_sec) for m in measured] == [2, 2, 2]


def test_a_change_to_training_that_could_clear_the_margin_runs_on_beside_the_input_only_best():
    # estimate ~1,600 examples/s; trial 1 swings 1,850-2,130: it may clear 1.2x, or not.
    runner = Runner(_alternating({2: (0.010,), 1: (0.005, 0.0073), 5: (0.05,)}))
    finalists = [
        finalist("estimate", 2),
        dataclasses.replace(finalist("trial 1", 1), changes_training=True),
        dataclasses.replace(finalist("trial 5", 5), changes_training=True),
    ]
    measured = remeasure(finalists, repeats(4, runner))
    assert runner.calls[6:] == [2, 1, 1, 2]  # trial 5 is far short of it; the others run on
    assert [len(m.examples_per_sec) for m in measured] == [4, 4, 2]


def test_the_answer_decides_the_rounds_of_each_group_by_its_own_rule():
    from tfperf.tuner._remeasure import deciding

    # Input-only: a leader alone decides nothing; two within each other's noise run on.
    assert deciding([[100.0, 104.0], [90.0, 92.0]], [False, False]) == []
    assert deciding([[100.0, 104.0], [101.0, 99.0]], [False, False]) == [0, 1]
    # A change to training whose best window reaches 1.2x the input-only leader's worst runs
    # on, and so does that leader; one below it does not, however close to the other.
    assert deciding([[100.0, 104.0], [121.0, 118.0], [119.0, 117.0]], [False, True, True]) == [
        0,
        1,
    ]
    assert deciding([[100.0, 104.0], [121.0, 118.0]], [False, True], margin=1.3) == []
    # One that has cleared it beyond the noise needs no more windows to be recommended.
    assert deciding([[100.0, 101.0], [130.0, 128.0]], [False, True]) == []
    # No input-only figure to weigh against: every change to training still could.
    assert deciding([[], [121.0, 118.0], [119.0, 117.0]], [False, True, True]) == [1, 2]


def test_confirmation_stops_once_no_change_to_training_can_clear_the_margin():
    """Issue 56: the confirmation ran on while the input-only best and a change to training
    within its noise still contended, though the change could not be recommended."""
    chosen = [
        Measurement("estimate", 2, Knobs(num_parallel_calls=2), [1600.0, 1580.0], 0, None),
        Measurement(
            "trial 1", 1, Knobs(num_parallel_calls=1, batch_size=64), [1650.0, 1600.0], 0, None
        ),
    ]
    # ~1,570-1,620 against ~1,600-1,650: each within the other's noise, far short of 1.2x.
    waits = {2: (0.0098, 0.0104), 1: (0.0288, 0.0300)}
    unweighed = Runner(_alternating(waits))
    confirm(chosen, chosen, repeats(3, unweighed))
    assert len(unweighed.calls) == 6  # without a baseline: they contend, so a third round
    weighed = Runner(_alternating(waits))
    confirmed = confirm(chosen, chosen, repeats(3, weighed), baseline=Knobs())
    assert len(weighed.calls) == 4  # the two rounds each figure's spread needs, no more
    assert [len(m.confirmed) for m in confirmed] == [2, 2]


def _by_batch(req: TrialRequest, budgets: Budgets) -> TrialOutcome:
    """A run whose examples/s follow the batch alone: 10 ms wait and 10 ms step a batch."""
    return TrialOutcome(TrialStatus.COMPLETE, fake_result(req.knobs, 0.01), "", 100, None, 1.0)


def _m(label: str, number: int | None, knobs: dict, rates: list[float]) -> Measurement:
    return Measurement(label, number, knobs, rates, 0, None)


def test_an_answer_that_changes_training_twice_is_measured_with_each_change_reverted():
    # The search's answer doubled the batch twice and quadrupled the shuffle buffer; only the
    # batch buys speed. Each change reverted is measured beside it, and the recommendation is
    # the one that keeps the gain with the least change: the buffer as written.
    from tfperf.results.tune import configuration_name, input_only_choice
    from tfperf.tuner._remeasure import trim_answer

    base = {"batch_size": 32, "shuffle_buffer": 500, "num_parallel_calls": 1}
    leader = {**base, "batch_size": 128, "shuffle_buffer": 2000, "num_parallel_calls": 8}
    measured = [
        _m("trial 0", 0, leader, [6300.0, 6400.0]),
        _m("trial 1", 1, {**base, "num_parallel_calls": 8}, [1550.0, 1600.0]),
        _m("baseline", 0, base, [1000.0, 1005.0]),
    ]
    heard: list = []
    result = trim_answer(measured, repeats(3, _by_batch), 1.2, lambda *a: heard.append(a))
    assert heard == [
        (
            [
                "trial 0",
                "trial 0 with batch_size as written",
                "trial 0 with shuffle_buffer as written",
            ],
            2,
        )
    ]
    by_label = {m.label: m for m in result}
    assert len(by_label["trial 0"].examples_per_sec) == 4  # its own two, and two beside them
    variant = by_label["trial 0 with shuffle_buffer as written"]
    assert variant.trial_number is None
    assert variant.knobs == Knobs.from_mapping({**leader, "shuffle_buffer": 500})
    assert by_label["trial 0 with batch_size as written"].median == pytest.approx(1600.0)
    choice = input_only_choice(result, by_label["baseline"])
    assert choice.best is variant and choice.input_only.label == "trial 1"
    assert configuration_name(variant) == "the knobs of trial 0 with shuffle_buffer as written"
    assert configuration_name(choice.input_only) == "trial 1's knobs"


def test_an_answer_that_changes_training_once_or_not_at_all_is_left_as_it_is():
    from tfperf.tuner._remeasure import trim_answer

    base = {"batch_size": 32, "shuffle_buffer": 500}
    once = [
        _m("trial 0", 0, {**base, "batch_size": 128}, [6400.0, 6400.0]),
        _m("baseline", 0, base, [1600.0, 1600.0]),
    ]
    assert trim_answer(once, repeats(3, _by_batch), 1.2) == once
    # Two changes, but short of the margin over the input-only best: the answer keeps training.
    short = [
        _m("trial 0", 0, {**base, "batch_size": 40, "shuffle_buffer": 2000}, [1700.0, 1700.0]),
        _m("baseline", 0, base, [1600.0, 1600.0]),
    ]
    assert trim_answer(short, repeats(3, _by_batch), 1.2) == short


def test_an_answer_written_at_call_sites_is_trimmed_site_by_site():
    from tfperf.tuner._remeasure import trim_answer

    batch, shuffle = "batch@p.py:9.batch_size", "shuffle@p.py:8.buffer_size"
    base = {"sites": {batch: 32, shuffle: 500}}
    answer = {"sites": {batch: 128, shuffle: 2000}, "num_parallel_calls": 8}
    measured = [
        _m("trial 0", 0, answer, [6400.0, 6400.0]),
        _m("baseline", 0, base, [1600.0, 1600.0]),
    ]
    heard: list = []
    result = trim_answer(measured, repeats(2, _by_batch), 1.2, lambda *a: heard.append(a))
    assert heard[0][0][1:] == [
        f"trial 0 with {batch} as written",
        f"trial 0 with {shuffle} as written",
    ]
    variant = next(m for m in result if m.label.endswith(f"{shuffle} as written"))
    assert dict(variant.knobs.sites) == {batch: 128, shuffle: 500}
