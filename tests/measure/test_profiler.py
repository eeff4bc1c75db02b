"""The profiler on a fake clock: every figure is asserted exactly."""

from __future__ import annotations

import pytest

from tests.fakes.clock import Batch, FakeClock, TimedData, timed_step
from tfperf.errors import EmptyDatasetError, InputPipelineError, TfperfError, TrainStepError
from tfperf.measure import Progress
from tfperf.measure._profiler import Profiler, profile
from tfperf.results import Phase, Verdict


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_end_to_end_figures_are_exact(clock):
    # Step 1 is slow (warm-up); then every step waits 10 ms and computes 30 ms.
    data = TimedData(clock, [0.5] + [0.01] * 9, batch=8)
    result = profile(
        data,
        timed_step(clock, 0.03),
        steps=4,
        warmup=1,
        clock=clock,
        probes=[],
        measure_pipeline=False,
        measure_compute=False,
    )
    e2e = result.end_to_end
    assert e2e.steps == 4
    assert e2e.warmup.steps == 1
    assert e2e.warmup.time_to_first_batch_s == pytest.approx(0.5)
    assert e2e.warmup.duration_s == pytest.approx(0.53)
    assert e2e.duration_s == pytest.approx(0.16)
    assert e2e.examples == 32
    assert e2e.examples_per_sec == pytest.approx(200.0)
    assert e2e.steps_per_sec == pytest.approx(25.0)
    assert e2e.input_wait_fraction == pytest.approx(0.25)
    assert e2e.step_time.p50_s == pytest.approx(0.04)
    assert result.verdict is Verdict.HIGHLY_INPUT_BOUND
    assert result.pipeline_only is None and result.compute_only is None
    assert result.speedup_if_input_free is None


def test_the_step_clock_stops_after_the_given_sync(clock):
    """A framework's `sync` finishes each step's asynchronous work: its time counts as compute."""
    data = TimedData(clock, [0.01] * 10, batch=4)
    synced: list[object] = []

    def sync(outputs: object) -> None:
        synced.append(outputs)
        clock.advance(0.03)  # the step's queued work finishing

    result = profile(
        data,
        lambda batch: "outputs",
        steps=3,
        warmup=0,
        clock=clock,
        probes=[],
        measure_pipeline=False,
        measure_compute=False,
        sync=sync,
    )
    assert synced == ["outputs", "outputs", "outputs"]
    assert result.end_to_end.step_time.p50_s == pytest.approx(0.04)
    assert result.end_to_end.input_wait_fraction == pytest.approx(0.25)


def test_three_phases_and_speedup_if_input_free(clock):
    data = TimedData(clock, [0.02] * 10, batch=4)
    result = profile(data, timed_step(clock, 0.02), steps=5, warmup=0, clock=clock, probes=[])
    assert result.end_to_end.examples_per_sec == pytest.approx(100.0)  # 4 / 0.04 s
    assert result.pipeline_only is not None and result.compute_only is not None
    assert result.pipeline_only.examples_per_sec == pytest.approx(200.0)  # 4 / 0.02 s
    assert result.pipeline_only.compute_s == pytest.approx(0.0)
    assert result.compute_only.wait_s == pytest.approx(0.0)
    assert result.compute_only.examples_per_sec == pytest.approx(200.0)
    assert result.speedup_if_input_free == pytest.approx(2.0)
    assert result.input_wait_fraction == pytest.approx(0.5)


def test_compute_bound_when_input_is_free(clock):
    data = TimedData(clock, [0.0] * 20)
    result = profile(data, timed_step(clock, 0.05), steps=10, warmup=2, clock=clock, probes=[])
    assert result.input_wait_fraction == 0.0
    assert result.verdict is Verdict.COMPUTE_BOUND
    assert "not the bottleneck" in result.advice


def test_finite_data_crosses_epochs_and_counts_them(clock):
    data = TimedData(clock, [0.01] * 3)
    result = profile(
        data,
        timed_step(clock, 0.01),
        steps=7,
        warmup=0,
        clock=clock,
        probes=[],
        measure_pipeline=False,
        measure_compute=False,
    )
    assert result.end_to_end.steps == 7
    assert result.end_to_end.epochs_crossed == 2
    assert [r.epoch for r in result.end_to_end.records] == [0, 0, 0, 1, 1, 1, 2]


def test_empty_dataset_is_a_clear_error(clock):
    with pytest.raises(EmptyDatasetError, match="the dataset is empty"):
        profile(TimedData(clock, []), timed_step(clock, 0.01), steps=3, clock=clock, probes=[])


def test_input_error_names_the_batch(clock):
    def broken():
        yield Batch(2)
        raise RuntimeError("corrupt record")

    class Data:
        def __iter__(self):
            return broken()

    with pytest.raises(InputPipelineError, match="batch 2: corrupt record") as caught:
        profile(Data(), timed_step(clock, 0.01), steps=3, clock=clock, probes=[])
    assert caught.value.step == 1
    assert isinstance(caught.value.__cause__, RuntimeError)


def test_train_step_error_names_the_step(clock):
    def step(batch):
        raise ValueError("shapes (8, 3) and (4,) are incompatible")

    with pytest.raises(TrainStepError, match="ValueError on step 1") as caught:
        profile(TimedData(clock, [0.01] * 3), step, steps=2, clock=clock, probes=[])
    assert caught.value.step == 0


def test_automatic_warmup_skips_the_slow_start(clock):
    waits = [0.4, 0.2, 0.1] + [0.01] * 40
    result = profile(
        TimedData(clock, waits),
        timed_step(clock, 0.01),
        steps=10,
        clock=clock,
        probes=[],
        measure_pipeline=False,
        measure_compute=False,
    )
    e2e = result.end_to_end
    assert e2e.warmup.converged
    assert e2e.warmup.steps == 6  # steady windows [1:6] and [6:11]: measure from step 6
    assert e2e.step_time.max_s == pytest.approx(0.02)
    assert e2e.steps >= 10


def test_user_loop_without_mark_step_closes_at_next_request(clock):
    with Profiler(warmup=0, clock=clock, probes=[]) as profiler:
        for _ in profiler.iterate(TimedData(clock, [0.01] * 4, batch=2)):
            clock.advance(0.03)  # the user's work, never marked
    result = profiler.result()
    assert result.end_to_end.steps == 4
    assert result.end_to_end.compute_s == pytest.approx(0.12)
    assert result.end_to_end.wait_s == pytest.approx(0.04)


def test_mark_step_synchronises_outputs(clock):
    synced = []

    class Tensor:
        def numpy(self):
            clock.advance(0.02)  # waiting for queued kernels
            synced.append(True)

    with Profiler(warmup=0, clock=clock, probes=[]) as profiler:
        for _ in profiler.iterate(TimedData(clock, [0.0] * 3)):
            profiler.mark_step({"loss": Tensor(), "metrics": [Tensor()]})
            clock.advance(1.0)  # after the step closed: neither wait nor compute
    result = profiler.result()
    assert len(synced) == 6
    assert result.end_to_end.compute_s == pytest.approx(0.12)


def test_progress_reports_warmup_then_measured_steps(clock):
    events: list[Progress] = []
    profile(
        TimedData(clock, [0.01] * 5),
        timed_step(clock, 0.01),
        steps=3,
        warmup=2,
        clock=clock,
        probes=[],
        measure_pipeline=False,
        measure_compute=False,
        progress=events.append,
    )
    assert [(e.warming_up, e.measured_steps) for e in events] == [
        (True, 0),
        (False, 0),
        (False, 1),
        (False, 2),
        (False, 3),
    ]
    assert {e.target_steps for e in events} == {3}
    # 8 examples per 20 ms step once measuring starts.
    rates = [e.examples_per_sec for e in events]
    assert rates[:2] == [None, None]
    assert rates[2:] == pytest.approx([400.0, 400.0, 400.0])
    assert {e.phase for e in events} == {Phase.END_TO_END}


def test_min_seconds_stretches_a_fast_window_until_it_lasts_that_long(clock):
    # 20 ms steps: 3 steps last 60 ms, so a 100 ms floor takes 5 measured steps.
    events: list[Progress] = []
    result = profile(
        TimedData(clock, [0.01] * 4),
        timed_step(clock, 0.01),
        steps=3,
        min_seconds=0.1,
        warmup=1,
        clock=clock,
        probes=[],
        progress=events.append,
    )
    assert result.end_to_end.steps == 5
    assert result.end_to_end.duration_s == pytest.approx(0.1)
    assert result.pipeline_only is not None and result.pipeline_only.steps == 10  # 10 ms steps
    assert result.compute_only is not None and result.compute_only.steps == 10
    end_to_end = [e for e in events if e.phase is Phase.END_TO_END]
    assert [e.measured_steps for e in end_to_end if e.complete] == [5]  # only the last step
    assert not any(e.complete for e in end_to_end[:-1])


def test_min_seconds_below_the_steps_window_changes_nothing(clock):
    result = profile(
        TimedData(clock, [0.01] * 4),
        timed_step(clock, 0.01),
        steps=3,
        min_seconds=0.05,
        warmup=1,
        clock=clock,
        probes=[],
        measure_pipeline=False,
        measure_compute=False,
    )
    assert result.end_to_end.steps == 3  # 60 ms already exceeds the 50 ms floor


def test_negative_min_seconds_rejected(clock):
    with (
        Profiler(clock=clock, probes=[]) as profiler,
        pytest.raises(ValueError, match="min_seconds >= 0"),
    ):
        profiler.iterate([1], steps=1, min_seconds=-1.0)


def test_iterating_before_start_is_an_error(clock):
    profiler = Profiler(clock=clock, probes=[])
    with pytest.raises(TfperfError, match="start the profiler first"):
        profiler.iterate([1, 2])


def test_result_without_steps_explains_the_loop(clock):
    with Profiler(clock=clock, probes=[]) as profiler:
        pass
    with pytest.raises(TfperfError, match="mark_step"):
        profiler.result()


@pytest.mark.parametrize("steps", [0, -3])
def test_non_positive_steps_rejected(clock, steps):
    with pytest.raises(ValueError, match="steps >= 1"):
        profile(TimedData(clock, [0.01]), timed_step(clock, 0.01), steps=steps, probes=[])


def test_breaking_out_of_a_user_loop_keeps_the_last_step(clock):
    with Profiler(warmup=0, clock=clock, probes=[]) as profiler:
        for number, _ in enumerate(profiler.iterate(TimedData(clock, [0.01] * 10))):
            clock.advance(0.02)
            if number == 2:
                break
    result = profiler.result()
    assert result.end_to_end.steps == 3
    assert result.end_to_end.compute_s == pytest.approx(0.06)


def test_a_disturbed_compute_only_phase_cannot_contradict_the_wait_share(clock):
    # End to end: 10 ms wait + 30 ms compute a step (25% wait). The compute-only replay of the
    # same batches is disturbed (40 ms a step, a busier machine): taken as it is, the ceiling
    # would read 1.0x, "input costs nothing", next to a highly input-bound verdict.
    calls = []

    def step(batch):
        calls.append(batch)
        clock.advance(0.03 if len(calls) <= 5 else 0.04)

    data = TimedData(clock, [0.01] * 10, batch=4)
    result = profile(data, step, steps=5, warmup=0, clock=clock, probes=[])
    assert result.verdict is Verdict.HIGHLY_INPUT_BOUND
    assert result.input_wait_fraction == pytest.approx(0.25)
    assert result.compute_only is not None
    assert result.compute_only.examples_per_sec == pytest.approx(100.0)  # 4 / 0.04 s
    assert result.compute_slowdown == pytest.approx(0.75)
    # The ceiling is the end-to-end compute rate (4 / 0.03 s), the wait taken away: 1 / (1 - 25%).
    assert result.speedup_if_input_free == pytest.approx(4 / 0.03 / 100.0)
    assert "keeps up (400 vs 133 examples/s needed)" in result.advice
