"""The pipeline model: stage costs, the limit and Little's-law thread counts from stage figures.

The figures are hand-built as the stage analysis records them (each stage's cumulative rate and
CPU per example), so every assertion is exact; one real pipeline checks that a sleeping stage
is recognised as blocking.
"""

from __future__ import annotations

import dataclasses
import math
import time

import pytest

from tfperf.measure import stage_report, with_added_costs
from tfperf.measure._costs import stage_costs
from tfperf.measure._limit import pipeline_limit
from tfperf.measure._model import (
    InputCpu,
    PipelineModel,
    input_cpu_s_per_example,
    model_cpu_s_per_example,
    nearest_limit_input_cpu,
    pipeline_model,
)
from tfperf.measure._policy import POLICY
from tfperf.measure._revise import PIPELINE_ONLY, STAGE_ANALYSIS, revise_limit
from tfperf.results import CpuUsage, Limit, LimitBound, LimitTerm, TimedValue
from tfperf.results.stages import StageKind, StageStat, StageUnit


def _stat(index, kind, label, rate, cpu, parameters=None, unit=StageUnit.EXAMPLE):
    return StageStat(
        index=index,
        kind=kind,
        label=label,
        location=None,
        parameters=parameters or {},
        unit=unit,
        elements_per_sec=rate,
        examples_per_sec=rate,
        cpu_s_per_element=cpu,
        cpu_s_per_example=cpu,
        added_s_per_example=None,
        added_cpu_s_per_example=None,
        elements=1000,
        duration_s=1.0,
    )


def _report(stats, consumption=None):
    return stage_report(
        with_added_costs(stats),
        consumption,
        seconds_per_stage=1.0,
        warmup_s=0.1,
        duration_s=1.0,
        note=None,
    )


def _remote_storage(fetch_threads=1):
    """range (10 µs) -> map(fetch): 2 ms sleep, 20 µs CPU, on `fetch_threads` -> map(decode)."""
    fetch_wall = 0.002 / fetch_threads
    return _report(
        [
            _stat(0, StageKind.SOURCE, "range", 1 / 10e-6, 10e-6),
            _stat(
                1,
                StageKind.MAP,
                "map(fetch)",
                1 / (10e-6 + fetch_wall),
                30e-6,
                {"num_parallel_calls": fetch_threads},
            ),
            _stat(2, StageKind.MAP, "map(decode)", 1 / (60e-6 + fetch_wall), 80e-6),
        ]
    )


def test_a_blocking_stage_gets_littles_law_threads_for_the_compute_rate():
    model = pipeline_model(_remote_storage(), cores=2, compute_examples_per_sec=9000.0)

    assert model is not None
    fetch = next(stage for stage in model.stages if stage.label == "map(fetch)")
    assert fetch.blocking
    assert fetch.wall_s_per_example == pytest.approx(0.002)
    # 9,000 examples/s x 2 ms = 18 fetches in flight, on 2 cores.
    assert model.threads == {"num_parallel_calls": 18}
    assert model.limit.bound_by is LimitBound.COMPUTE
    assert model.limit.examples_per_sec == pytest.approx(9000.0)
    assert model.predicted_examples_per_sec == pytest.approx(9000.0)


def test_a_blocking_stage_is_sized_for_the_compute_rate_when_the_cpu_roofline_binds():
    # The model's step costs 0.3 ms of CPU per example: 2 cores bound the pipeline at ~6,000,
    # and twice that (the headroom a waiting stage gets over the roofline) is above 9,000.
    model = pipeline_model(
        _remote_storage(), cores=2, compute_examples_per_sec=9000.0, model_cpu_s_per_example=3e-4
    )

    assert model is not None and model.limit.bound_by is LimitBound.CPU
    assert model.limit.examples_per_sec < 6500
    # The fetch's threads wait: sized for 9,000 x 2 ms, not for the roofline's rate.
    assert model.threads == {"num_parallel_calls": 18}
    assert model.predicted_examples_per_sec == pytest.approx(model.limit.examples_per_sec)


def test_a_blocking_stage_is_sized_for_twice_the_roofline_when_the_model_alone_is_far_faster():
    # A small model (100,000 examples/s alone, 0.3 ms CPU per example): the 2 cores bound the
    # pipeline near 5,300 examples/s. Sizing the fetch for the model alone would ask for 200
    # threads that could only wait (and contend for the GIL, as the benchmarks' Python fetches
    # do); it gets twice the roofline's rate instead.
    model = pipeline_model(
        _remote_storage(), cores=2, compute_examples_per_sec=100_000.0, model_cpu_s_per_example=3e-4
    )

    assert model is not None and model.limit.bound_by is LimitBound.CPU
    roofline = model.limit.examples_per_sec
    assert roofline == pytest.approx(2 / (0.08e-3 + 0.3e-3), rel=1e-3)  # input + model CPU
    assert model.threads == {
        "num_parallel_calls": math.ceil(POLICY.blocking_headroom * roofline * 0.002)
    }
    assert model.threads["num_parallel_calls"] == 22  # ceil(2 x 5,263/s x 2 ms)


def test_the_measured_parallelism_is_undone_to_get_one_threads_time():
    # The same fetch measured on 4 threads adds a quarter of the time per example.
    model = pipeline_model(_remote_storage(4), cores=2, compute_examples_per_sec=9000.0)

    assert model is not None and model.threads == {"num_parallel_calls": 18}


def test_the_limit_is_the_cpu_roofline_when_input_and_model_share_few_cores():
    # A parse costing 1 ms of CPU per example, measured on 2 threads (0.5 ms per example).
    report = _report(
        [
            _stat(0, StageKind.SOURCE, "range", 1 / 10e-6, 10e-6),
            _stat(1, StageKind.MAP, "map(parse)", 1 / 510e-6, 1010e-6, {"num_parallel_calls": 2}),
        ]
    )
    model = pipeline_model(
        report, cores=2, compute_examples_per_sec=5000.0, model_cpu_s_per_example=0.19e-3
    )

    assert model is not None
    assert model.limit.bound_by is LimitBound.CPU
    # 2 cores ÷ (1.01 ms input + 0.19 ms model) per example.
    assert model.limit.examples_per_sec == pytest.approx(2 / 1.2e-3)
    assert "2 usable cores" in model.limit.terms[1].detail
    # A computing stage gets the calls the cores hold (2 per core), not Little's law's count.
    assert not model.stages[1].blocking
    assert model.threads == {"num_parallel_calls": 2 * 2}


def _parse_report(cpu_s: float):
    """range -> map(parse): a parse costing `cpu_s` of CPU per example, on one thread."""
    return _report(
        [
            _stat(0, StageKind.SOURCE, "range", 1 / 10e-6, 10e-6),
            _stat(1, StageKind.MAP, "map(parse)", 1 / cpu_s, cpu_s, {"num_parallel_calls": 1}),
        ]
    )


@pytest.mark.parametrize(
    ("cores", "model_cpu", "pool"),
    [
        # 2 cores ÷ (1 + 0.19 ms) = 1,681/s, at which the input spends 1.68 cores: one core
        # would hold it to 1,000/s, so 2.
        (2, 0.19e-3, 2),
        # 2 cores ÷ (1 + 0.59 ms) = 1,258/s: the input spends 1.26 cores, and one core would
        # hold it to 79% of the rate: 2 still.
        (2, 0.59e-3, 2),
        # 2 cores ÷ (1 + 0.86 ms) = 1,075/s: 1.08 cores, and one core holds it to 93%: 1.
        (2, 0.86e-3, 1),
        # 16 cores ÷ (1 + 0.59 ms) = 10,063/s: the input spends 10.1 cores; 10 hold 99%.
        (16, 0.59e-3, 10),
        # The step alone needs most of the machine: the input still gets one core.
        (2, 5e-3, 1),
    ],
)
def test_the_input_is_pooled_on_the_fewest_cores_that_hold_its_predicted_rate(
    cores, model_cpu, pool
):
    model = pipeline_model(
        _parse_report(1e-3), cores, compute_examples_per_sec=1e6, model_cpu_s_per_example=model_cpu
    )
    assert model is not None and model.cores_for_input == pool
    # A pool holds the input to its cores: 1 ms of CPU per example on each.
    assert model.pool_cap(pool) == pytest.approx(pool / 1e-3)
    assert model.pool_cap(pool) >= POLICY.pool_tolerance * model.predicted_examples_per_sec
    if pool > 1:
        assert model.pool_cap(pool - 1) < POLICY.pool_tolerance * model.predicted_examples_per_sec


def test_an_unsampled_step_is_counted_on_every_core_at_its_compute_only_rate():
    # No CPU samples in the compute-only window: the step at 4,000/s alone fills 8 cores, so
    # 2 ms per example. The roofline counts the input alone then (8 ÷ 3 ms = 2,667/s), at
    # which it spends all 8 cores.
    model = pipeline_model(_parse_report(3e-3), 8, compute_examples_per_sec=4000.0)
    assert model is not None
    assert model.predicted_examples_per_sec == pytest.approx(8 / 3e-3)
    assert model.model_cpu_s_per_example == pytest.approx(2e-3)
    assert model.cores_for_input == 8


def test_without_the_inputs_cpu_no_pool_is_sized():
    model = PipelineModel((), None, 2, {}, 4, 2400.0)  # type: ignore[arg-type]
    assert model.cores_for_input is None
    assert model.pool_cap(1) is None


def test_a_sequential_stage_binds_and_is_named():
    report = _report(
        [
            _stat(0, StageKind.SOURCE, "from_generator(read)", 1 / 1e-3, 50e-6),
            _stat(1, StageKind.MAP, "map(parse)", 1 / 1.01e-3, 60e-6, {"num_parallel_calls": -1}),
        ]
    )
    model = pipeline_model(report, cores=8, compute_examples_per_sec=20_000.0)

    assert model is not None
    assert model.limit.bound_by is LimitBound.SEQUENTIAL_STAGE
    assert model.limit.examples_per_sec == pytest.approx(1000.0)
    assert "from_generator(read)" in model.limit.explanation


def test_a_blocking_stage_feeding_a_sequential_one_is_sized_with_headroom_over_it():
    # A sequential source at 5,000/s feeds a 2 ms blocking fetch (40 us CPU); the model alone
    # runs 50,000/s and the cores allow more than the source. Sized for the source alone the
    # fetch would get 5,000 x 2 ms = 10 threads; with the headroom, twice that.
    report = _report(
        [
            _stat(0, StageKind.SOURCE, "from_generator(keys)", 1 / 0.2e-3, 0.2e-3),
            _stat(1, StageKind.MAP, "map(fetch)", 1 / 2.2e-3, 0.24e-3, {"num_parallel_calls": 1}),
        ]
    )
    model = pipeline_model(report, cores=8, compute_examples_per_sec=50_000.0)

    assert model is not None
    assert model.limit.bound_by is LimitBound.SEQUENTIAL_STAGE
    assert model.limit.examples_per_sec == pytest.approx(5000.0)
    assert model.threads == {
        "num_parallel_calls": math.ceil(POLICY.blocking_headroom * 5000 * 2e-3)
    }


def test_a_prefetch_never_binds_as_a_sequential_stage():
    # The stage analysis attributes 0.2 ms to prefetch(2): upstream's time showing through.
    report = _report(
        [
            _stat(0, StageKind.SOURCE, "range", 1 / 10e-6, 10e-6),
            _stat(1, StageKind.MAP, "map(fetch)", 1 / 1e-3, 30e-6, {"num_parallel_calls": 1}),
            _stat(2, StageKind.PREFETCH, "prefetch(2)", 1 / 1.2e-3, 0.2e-3),
        ]
    )
    model = pipeline_model(report, cores=2, compute_examples_per_sec=30_000.0)

    assert model is not None
    assert [t.bound_by for t in model.limit.terms] == [LimitBound.COMPUTE, LimitBound.CPU]
    # The blocking fetch is sized for twice the CPU roofline (2 cores ÷ 0.2 ms = 10,000/s),
    # below the compute-only rate: 20,000/s x 1 ms.
    assert model.threads == {"num_parallel_calls": 20}
    assert model.blocks


def test_the_thread_cap_bounds_a_stage_and_the_prediction():
    # A 100 ms call at 9,000 examples/s would want 900 threads.
    report = _report(
        [
            _stat(0, StageKind.SOURCE, "range", 1 / 10e-6, 10e-6),
            _stat(1, StageKind.MAP, "map(call)", 1 / 0.10001, 20e-6, {"num_parallel_calls": 1}),
        ]
    )
    model = pipeline_model(report, cores=2, compute_examples_per_sec=9000.0)

    assert model is not None and model.threads == {"num_parallel_calls": POLICY.thread_cap}
    assert model.predicted_examples_per_sec == pytest.approx(POLICY.thread_cap / 0.1, rel=1e-3)


def test_no_limit_without_any_figure():
    assert (
        pipeline_limit(
            [],
            cores=2,
            compute_examples_per_sec=None,
            input_cpu_s_per_example=None,
            model_cpu_s_per_example=None,
        )
        is None
    )


def test_a_parallel_stage_that_calls_python_is_named_in_the_limit():
    report = _remote_storage(fetch_threads=4)
    fetch = dataclasses.replace(report.stages[1], calls_python=True)
    report = dataclasses.replace(report, stages=[report.stages[0], fetch, report.stages[2]])
    model = pipeline_model(report, cores=2, compute_examples_per_sec=9000.0)

    assert model is not None
    assert model.limit.python_stage == "map(fetch)"
    assert model.limit.explanation.endswith(
        "map(fetch) calls Python, and its threads queue for the process's one interpreter "
        "lock, which this limit does not count: the input may stop short of it with cores "
        "idle. Fewer, larger Python calls (a batch per call, one request for many objects) or "
        "TensorFlow ops in its place would lift that."
    )
    # Without Python in it, the same pipeline's limit names none and says nothing of a lock.
    plain = pipeline_model(_remote_storage(fetch_threads=4), 2, 9000.0)
    assert plain is not None and plain.limit.python_stage is None
    assert "interpreter lock" not in plain.limit.explanation


def test_a_map_written_sequential_that_calls_python_is_priced_tuned_with_the_caveat():
    # Tuning gives the map threads, so it is no sequential bound; its threads then queue for
    # the interpreter lock, which the caveat says.
    report = _remote_storage(fetch_threads=1)
    fetch = dataclasses.replace(report.stages[1], calls_python=True, parameters={})
    report = dataclasses.replace(report, stages=[report.stages[0], fetch, report.stages[2]])
    model = pipeline_model(report, cores=2, compute_examples_per_sec=9000.0)

    assert model is not None and model.limit.python_stage == "map(fetch)"
    assert model.limit.bound_by is not LimitBound.SEQUENTIAL_STAGE


def test_stages_that_add_no_time_are_left_out():
    costs = stage_costs(_remote_storage())
    assert [cost.label for cost in costs] == ["range", "map(fetch)", "map(decode)"]
    assert [cost.argument for cost in costs] == [None, "num_parallel_calls", None]


def test_model_cpu_is_read_from_the_samples_inside_the_compute_only_window():
    from tests.reports import fake_profile

    profile = fake_profile()
    phase = profile.compute_only
    assert phase is not None
    start = phase.records[0].start_s
    end = phase.records[-1].start_s + phase.records[-1].step_s
    samples = [TimedValue(start - 1.0, 190.0), TimedValue(start, 50.0), TimedValue(end, 150.0)]
    profile = dataclasses.replace(profile, cpu=CpuUsage(100.0, 190.0, 2, samples))

    # One busy core on average inside the window, at the compute-only rate.
    assert model_cpu_s_per_example(profile) == pytest.approx(1.0 / phase.examples_per_sec)
    assert model_cpu_s_per_example(dataclasses.replace(profile, cpu=None)) is None


def _with_pipeline_cpu(profile, busy_percent, rate=None):
    """`profile` with its pipeline-only phase at `rate` and `busy_percent` CPU inside it."""
    phase = profile.pipeline_only
    assert phase is not None
    if rate is not None:
        phase = dataclasses.replace(phase, examples_per_sec=rate)
    start = phase.records[0].start_s
    end = phase.records[-1].start_s + phase.records[-1].step_s
    samples = [TimedValue(start - 1.0, 190.0), TimedValue(start, busy_percent)]
    samples.append(TimedValue(end, busy_percent))
    cpu = CpuUsage(busy_percent, 190.0, 2, samples)
    return dataclasses.replace(profile, pipeline_only=phase, cpu=cpu)


def test_input_cpu_is_read_from_the_samples_inside_the_pipeline_only_window():
    from tests.reports import fake_profile

    profile = _with_pipeline_cpu(fake_profile(), 50.0, rate=1000.0)

    # Half a core on average inside the window, at 1,000 examples/s.
    assert input_cpu_s_per_example(profile) == pytest.approx(0.5 / 1000.0)
    assert input_cpu_s_per_example(dataclasses.replace(profile, cpu=None)) is None


def test_the_input_cpu_that_holds_near_the_limit_is_the_fastest_configurations():
    from tests.reports import fake_profile

    baseline = _with_pipeline_cpu(fake_profile(), 50.0, rate=300.0)  # 1.67 ms per example
    autotune = _with_pipeline_cpu(fake_profile(), 40.0, rate=600.0)  # 0.67 ms
    estimate = _with_pipeline_cpu(fake_profile(), 100.0, rate=5000.0)  # 0.2 ms

    assert nearest_limit_input_cpu(baseline, [autotune, estimate]) == InputCpu(
        pytest.approx(0.2e-3), 5000.0
    )
    assert nearest_limit_input_cpu(baseline, [autotune]) == InputCpu(
        pytest.approx(40 / 100 / 600), 600.0
    )
    slower = _with_pipeline_cpu(fake_profile(), 10.0, rate=200.0)
    assert nearest_limit_input_cpu(baseline, [slower]) is None  # the baseline's figure stands
    assert nearest_limit_input_cpu(baseline, [dataclasses.replace(estimate, cpu=None)]) is None


def test_the_input_cpu_given_replaces_the_stage_analysiss_in_the_roofline():
    report = _remote_storage()  # 80 µs CPU per example at its output
    measured = pipeline_model(report, 2, 9000.0)
    given = pipeline_model(report, 2, 9000.0, input_cpu=InputCpu(0.5e-3, 3000.0))
    assert measured is not None and given is not None

    assert measured.limit.bound_by is LimitBound.COMPUTE  # 2 ÷ 80 µs = 25,000 does not bind
    assert given.limit.bound_by is LimitBound.CPU
    assert given.limit.examples_per_sec == pytest.approx(2 / 0.5e-3)
    assert given.limit.terms[1].detail == (
        "2 usable cores ÷ (0.5 ms input CPU per example; the input's figure measured at "
        "3,000 examples/s)"
    )


def _sleep_2ms(x):
    time.sleep(0.002)
    return x


@pytest.mark.tf
def test_a_real_sleeping_map_is_recognised_as_blocking():
    tf = pytest.importorskip("tensorflow")
    from tfperf.frameworks.tensorflow import analyse_stages

    def fetch(x):
        return tf.numpy_function(_sleep_2ms, [x], tf.int64, stateful=False)

    dataset = tf.data.Dataset.range(1_000_000).map(fetch, num_parallel_calls=1).batch(8)
    report = analyse_stages(dataset, seconds_per_stage=0.3, warmup_s=0.05)
    model = pipeline_model(report, cores=2, compute_examples_per_sec=9000.0)

    assert model is not None
    fetch_stage = next(stage for stage in model.stages if stage.kind is StageKind.MAP)
    # The sleep sets a floor of 2 ms per example; its CPU is a small part of that.
    assert fetch_stage.wall_s_per_example >= 0.002 * 0.9
    assert fetch_stage.blocking


def test_a_restart_costs_the_refill_at_the_faster_side_of_input_and_model():
    from tfperf.measure._model import Restarts

    restarts = Restarts(epoch_examples=2048, refill_examples=2048)
    # Input-bound: the drain at the model's rate gives back most of the fill.
    assert restarts.factor(1000.0, 4000.0) == pytest.approx(2048 / (2048 + 2048 / 4))
    # Model-bound: the fill is at the input's own (faster) rate, all of it lost.
    assert restarts.factor(1000.0, 500.0) == pytest.approx(2048 / (2048 + 2048 * 1000 / 1000))
    assert restarts.factor(1000.0, None, buffer_scale=0.5) == pytest.approx(2048 / 3072)


def test_a_computing_stage_gets_the_calls_the_cores_hold_even_when_the_target_is_low():
    # A parse doing nearly all the input's work (1 ms CPU of 1.01 ms), on one thread, behind a
    # model so slow that Little's law at its rate asks for a single thread.
    report = _report(
        [
            _stat(0, StageKind.SOURCE, "range", 1 / 10e-6, 10e-6),
            _stat(1, StageKind.MAP, "map(parse)", 1 / 1010e-6, 1010e-6, {"num_parallel_calls": 1}),
        ]
    )
    model = pipeline_model(report, cores=4, compute_examples_per_sec=500.0)

    assert model is not None
    assert math.ceil(500.0 * model.stages[1].wall_s_per_example) == 1  # Little's law alone
    assert model.threads == {"num_parallel_calls": POLICY.calls_per_core * 4}


def test_a_cheap_computing_stage_gets_as_many_calls_as_a_costly_one():
    # A map doing a tenth of the input's work (a sequential source does the rest): sized by
    # its share it got one call of the 4 the cores hold, and in_memory's map, sized so, ran
    # slower than at all 4 (docs/limit.md, "Nor the calls of a cheap stage").
    report = _report(
        [
            _stat(0, StageKind.SOURCE, "range", 1 / 90e-6, 90e-6),
            _stat(1, StageKind.MAP, "map(augment)", 1 / 100e-6, 100e-6, {"num_parallel_calls": 1}),
        ]
    )
    model = pipeline_model(report, cores=2, compute_examples_per_sec=5000.0)

    assert model is not None
    assert model.threads == {"num_parallel_calls": POLICY.calls_per_core * 2}


def test_computing_stages_share_the_cores_calls_in_the_pool_and_a_blocking_stage_adds_its_own():
    # source -> map(parse) computing -> map(augment) computing: one set of the cores' calls.
    computing = _report(
        [
            _stat(0, StageKind.SOURCE, "range", 1 / 10e-6, 10e-6),
            _stat(1, StageKind.MAP, "map(parse)", 1 / 70e-6, 70e-6, {"num_parallel_calls": 1}),
            _stat(2, StageKind.MAP, "map(augment)", 1 / 110e-6, 110e-6, {"num_parallel_calls": 1}),
        ]
    )
    model = pipeline_model(computing, cores=2, compute_examples_per_sec=5000.0)
    assert model is not None
    assert model.pool_threads == POLICY.calls_per_core * 2

    # A blocking fetch (2 ms sleep) then a parallel decode: the fetch's waiting threads, plus
    # the cores' calls for the decode.
    blocking = _report(
        [
            _stat(0, StageKind.SOURCE, "range", 1 / 10e-6, 10e-6),
            _stat(1, StageKind.MAP, "map(fetch)", 1 / 2010e-6, 30e-6, {"num_parallel_calls": 1}),
            _stat(2, StageKind.MAP, "map(decode)", 1 / 2090e-6, 110e-6, {"num_parallel_calls": 1}),
        ]
    )
    model = pipeline_model(blocking, cores=2, compute_examples_per_sec=5000.0)
    assert model is not None
    fetch, decode = model.stages[1], model.stages[2]
    assert fetch.blocking and not decode.blocking
    assert fetch.threads > POLICY.calls_per_core * 2
    assert model.pool_threads == fetch.threads + POLICY.calls_per_core * 2


def test_a_sequential_stage_after_a_parallel_one_that_keeps_up_states_no_term():
    # remote_storage's baseline in one bench: the fetch (one call, 3.09 ms) cut at 323.6/s,
    # the sequential decode after it 2.4% slower, noise: the decode runs beside the fetch's
    # thread and keeps up. Read as 1 / 0.0756 ms it once named the decode the limit.
    report = _report(
        [
            _stat(0, StageKind.SOURCE, "range", 1 / 10e-6, 10e-6),
            _stat(1, StageKind.MAP, "map(fetch)", 1 / 3.09e-3, 0.116e-3, {"num_parallel_calls": 1}),
            _stat(2, StageKind.MAP, "map(decode)", 1 / 3.1656e-3, 0.227e-3),
        ]
    )
    model = pipeline_model(report, cores=2, compute_examples_per_sec=30_000.0)

    assert model is not None
    assert LimitBound.SEQUENTIAL_STAGE not in [t.bound_by for t in model.limit.terms]
    assert model.limit.bound_by is LimitBound.CPU


def test_a_sequential_stage_slower_than_the_parallel_one_before_it_binds_at_its_cut():
    # The decode runs beside the fetch's thread: its cut's 5 ms is its own time per example,
    # not 5 - 2 ms added to the fetch's.
    report = _report(
        [
            _stat(0, StageKind.SOURCE, "range", 1 / 10e-6, 10e-6),
            _stat(1, StageKind.MAP, "map(fetch)", 1 / 2e-3, 40e-6, {"num_parallel_calls": 4}),
            _stat(2, StageKind.FILTER, "filter(decode)", 1 / 5e-3, 5e-3),
        ]
    )
    model = pipeline_model(report, cores=8, compute_examples_per_sec=50_000.0)

    assert model is not None
    assert model.limit.bound_by is LimitBound.SEQUENTIAL_STAGE
    assert model.limit.examples_per_sec == pytest.approx(200.0)
    term = model.limit.terms[-1]
    assert term.stage_label == "filter(decode)"
    assert term.detail == (
        "filter(decode) runs on one thread, beside the threads before it (2 ms): 5 ms per example"
    )


def test_sequential_stages_in_one_thread_add_up():
    # A 1 ms generator and a 0.5 ms filter run in turn on one thread (667/s), and the prefetch
    # after them starts another thread: the unbatch after it adds 4% of its cut's time and
    # keeps up.
    report = _report(
        [
            _stat(0, StageKind.SOURCE, "from_generator(read)", 1 / 1e-3, 1e-3),
            _stat(1, StageKind.FILTER, "filter(parse)", 1 / 1.5e-3, 1.5e-3),
            _stat(2, StageKind.PREFETCH, "prefetch(2)", 1 / 1.5e-3, 1.5e-3),
            _stat(3, StageKind.UNBATCH, "unbatch()", 1 / 1.56e-3, 1.56e-3),
            _stat(4, StageKind.MAP, "map(augment)", 1 / 1.6e-3, 1.6e-3, {"num_parallel_calls": 2}),
        ]
    )
    terms = [
        t
        for t in pipeline_limit(stage_costs(report), 8, 30_000.0, 1.6e-3, None).terms
        if t.bound_by is LimitBound.SEQUENTIAL_STAGE
    ]

    assert len(terms) == 1
    assert terms[0].examples_per_sec == pytest.approx(1 / 1.5e-3)
    assert terms[0].stage_label == "from_generator(read)"
    assert terms[0].detail.startswith("from_generator(read) -> filter(parse) run on one thread:")


# --- the limit's invariants (issue 45) ------------------------------------------------------


def _quickstart(batch_rate=639.0, map_parameters=None):
    """The quickstart's shape on 2 cores: a map that tuning parallelises, written on one call
    (`num_parallel_calls=1`), then a batch whose cut measured slow (noise) as in the issue."""
    parameters = {"num_parallel_calls": 1} if map_parameters is None else map_parameters
    return _report(
        [
            dataclasses.replace(
                _stat(0, StageKind.SOURCE, "from_tensor_slices", 14_231.0, None),
                unit=StageUnit.INPUT,
                examples_per_sec=None,
            ),
            _stat(
                1,
                StageKind.INTERLEAVE,
                "interleave(TFRecordDataset)",
                39_628.5,
                0.029e-3,
                {"cycle_length": 1, "num_parallel_calls": 1},
            ),
            _stat(2, StageKind.SHUFFLE, "shuffle(1000)", 38_859.4, 0.033e-3),
            _stat(3, StageKind.MAP, "map(_parse_and_augment)", 1_570.0, 0.844e-3, parameters),
            _stat(4, StageKind.BATCH, "batch(64)", batch_rate, 0.860e-3, {}, StageUnit.BATCH),
        ],
        consumption=4_540.0,
    )


@pytest.mark.parametrize("map_parameters", [{"num_parallel_calls": 1}, {}])
@pytest.mark.parametrize("batch_rate", [1_522.7, 639.0])
def test_the_quickstarts_map_and_batch_are_never_a_sequential_bound(map_parameters, batch_rate):
    measured = {"end to end": 1_141.0, "pipeline only": 1_157.0}
    model = pipeline_model(
        _quickstart(batch_rate, map_parameters), 2, 4_540.0, 0.225e-3, measured=measured
    )

    assert model is not None
    assert not [t for t in model.limit.terms if t.bound_by is LimitBound.SEQUENTIAL_STAGE]
    assert all(model.limit.examples_per_sec >= 0.95 * rate for rate in measured.values())
    assert "runs sequentially" not in model.limit.explanation
    assert "move it after batching" not in model.limit.explanation


def test_a_map_written_sequential_is_priced_at_its_tuned_rate():
    # 1 ms of CPU per example on 4 cores: 4,000/s once tuning gives it calls, not 1,000/s.
    report = _report(
        [
            _stat(0, StageKind.SOURCE, "range", 1 / 10e-6, 10e-6),
            _stat(1, StageKind.MAP, "map(decode)", 1 / 1.01e-3, 1.01e-3),
        ]
    )
    costs = stage_costs(report)
    assert costs[1].parallelisable and costs[1].argument is None
    limit = pipeline_limit(costs, 4, 50_000.0, None, None)

    assert limit is not None
    assert limit.bound_by is LimitBound.PARALLEL_STAGE
    assert limit.examples_per_sec == pytest.approx(4 / 1e-3)
    assert limit.terms[-1].stage_label == "map(decode)"


def test_a_waiting_map_written_sequential_is_sized_by_the_argument_tuning_sets():
    """A map written without `num_parallel_calls` (a knob left at None) that waits 2 ms per
    example: the limit prices it in parallel, so its threads are sized under the argument a
    tuned map takes, and the prediction is what those threads deliver. Before, the model
    predicted the limit and sized nothing: the estimate kept the map sequential. A batch
    written without `num_parallel_calls` stays sequential, as a search leaves it."""
    report = _report(
        [
            _stat(0, StageKind.SOURCE, "range", 1 / 3e-6, 3e-6),
            _stat(1, StageKind.MAP, "map(read)", 1 / 2.2e-3, 0.05e-3),
            _stat(2, StageKind.BATCH, "batch(32)", 1 / 2.21e-3, 0.06e-3, {}, StageUnit.BATCH),
        ]
    )
    model = pipeline_model(report, 2, 4_000.0)

    assert model is not None
    read, batch = model.stages[1], model.stages[2]
    assert read.argument is None and read.tuned_argument == "num_parallel_calls"
    assert batch.parallelisable and batch.tuned_argument is None
    assert model.limit.examples_per_sec == pytest.approx(4_000.0)
    # Little's law: 4,000/s x 2.2 ms in flight = 9 threads, and they deliver the limit.
    assert model.threads == {"num_parallel_calls": 9}
    assert model.pool_threads == 9  # the waiting threads only: no computing stage is sized
    assert model.blocks
    assert model.predicted_examples_per_sec == pytest.approx(4_000.0)
    assert 9 / read.wall_s_per_example >= model.predicted_examples_per_sec


def test_a_generator_is_a_sequential_bound():
    report = _report(
        [
            _stat(0, StageKind.SOURCE, "from_generator(read)", 1 / 2e-3, 0.5e-3),
            _stat(1, StageKind.MAP, "map(parse)", 1 / 2.2e-3, 0.7e-3),
        ]
    )
    limit = pipeline_limit(stage_costs(report), 8, 50_000.0, None, None)

    assert limit is not None and limit.bound_by is LimitBound.SEQUENTIAL_STAGE
    assert limit.examples_per_sec == pytest.approx(500.0)
    assert limit.terms[-1].stage_label == "from_generator(read)"
    assert "cannot run in parallel" in limit.explanation


def test_a_waiting_stage_is_held_by_the_threads_it_may_get():
    # 100 ms of sleep per example and no CPU: the cores do not bind it, its threads do.
    report = _report(
        [
            _stat(0, StageKind.SOURCE, "range", 1 / 10e-6, 10e-6),
            _stat(1, StageKind.MAP, "map(fetch)", 1 / 100.01e-3, 10e-6),
        ]
    )
    limit = pipeline_limit(stage_costs(report), 2, 50_000.0, 20e-6, None)

    assert limit is not None and limit.bound_by is LimitBound.PARALLEL_STAGE
    assert limit.examples_per_sec == pytest.approx(POLICY.thread_cap / 100e-3)


def _cpu_limit(rate=1000.0):
    term = LimitTerm(LimitBound.CPU, rate, "2 usable cores ÷ 2 ms CPU per example")
    return Limit(rate, LimitBound.CPU, "The host's cores bound this pipeline.", [term])


def test_a_measured_rate_above_the_limit_revises_it_and_says_so():
    revised = revise_limit(_cpu_limit(), {"end to end": 1_300.0, "trial 3": 1_250.0})

    assert revised.examples_per_sec == 1_300.0 and revised.revised
    assert revised.bound_by is LimitBound.MEASURED and revised.model_examples_per_sec == 1000.0
    assert revised.bound_words == "revised to the measured rate (end to end)"
    assert revised.explanation.startswith("Revised to the measured 1,300 examples/s (end to end)")
    assert "30% lower" in revised.explanation
    # Revising again keeps the model's own figure, and a slower rate changes nothing.
    again = revise_limit(revised, {"trial 7": 1_200.0})
    assert again.examples_per_sec == 1_300.0 and again.model_examples_per_sec == 1000.0


def test_a_rate_within_the_noise_of_the_limit_says_tfperf_cannot_tell():
    above = revise_limit(_cpu_limit(), {"end to end": 1_030.0})
    assert above.examples_per_sec == 1_030.0
    assert "cannot tell whether the pipeline is already at its limit" in above.explanation
    below = revise_limit(_cpu_limit(), {"end to end": 980.0})
    assert below.examples_per_sec == 1000.0 and not below.revised
    assert "cannot tell whether the pipeline is already at it" in below.explanation
    assert revise_limit(_cpu_limit(), {"end to end": 900.0}) == _cpu_limit()


def test_the_pipeline_alone_bounds_the_inputs_terms_only():
    compute = LimitTerm(LimitBound.COMPUTE, 1000.0, "the model alone")
    stage = LimitTerm(LimitBound.SEQUENTIAL_STAGE, 800.0, "filter runs on one thread", "filter")
    limit = Limit(800.0, LimitBound.SEQUENTIAL_STAGE, "filter binds.", [compute, stage])

    # The input alone at 5,000/s contradicts the stage's 800, not the model's 1,000.
    revised = revise_limit(limit, {}, {"pipeline only": 5_000.0})
    assert revised.examples_per_sec == 1000.0 and revised.bound_by is LimitBound.COMPUTE
    assert not revised.revised
    # A compute-bound limit below the input alone is no contradiction: it keeps its figure.
    bound = Limit(1000.0, LimitBound.COMPUTE, "The model binds.", [compute])
    kept = revise_limit(bound, {}, {"pipeline only": 5_000.0})
    assert (
        dataclasses.replace(kept, input_alone_examples_per_sec=None, input_alone_by=None) == bound
    )


def test_a_training_limit_below_the_input_alone_says_so_on_its_line():
    compute = LimitTerm(LimitBound.COMPUTE, 1000.0, "the model alone")
    bound = Limit(1000.0, LimitBound.COMPUTE, "The model binds.", [compute])
    kept = revise_limit(bound, {}, {"pipeline only": 5_000.0})
    assert kept.examples_per_sec == 1000.0 and kept.input_alone_examples_per_sec == 5_000.0
    assert kept.bound_words.startswith("bound by compute; the input alone ran faster, 5,000")
    assert "the model's step caps training, not the input" in kept.bound_words

    cores = revise_limit(_cpu_limit(4_978.0), {"end to end": 4_000.0}, {"pipeline only": 6_072.0})
    assert cores.examples_per_sec == 4_978.0 and cores.bound_by is LimitBound.CPU
    assert "6,072 examples/s (pipeline only)" in cores.bound_words
    assert "alone the input has the cores to itself" in cores.bound_words


def test_the_input_alone_is_not_stated_where_the_limit_is_above_it():
    slower = revise_limit(_cpu_limit(), {}, {"pipeline only": 900.0})
    assert slower.input_alone_examples_per_sec is None
    assert slower.bound_words == "bound by cpu"
    # A training rate that revises the limit past the input alone drops the note.
    noted = revise_limit(_cpu_limit(), {}, {"pipeline only": 1_200.0})
    revised = revise_limit(noted, {"trial 3": 1_500.0})
    assert revised.examples_per_sec == 1_500.0 and revised.input_alone_examples_per_sec is None
    assert revised.bound_words == "revised to the measured rate (trial 3)"
    # One that revises it short of the input alone keeps it.
    short = revise_limit(noted, {"trial 3": 1_100.0})
    assert short.revised and short.input_alone_examples_per_sec == 1_200.0
    assert short.bound_words.startswith("revised to the measured rate (trial 3); the input alone")


def test_the_whole_pipelines_rate_in_the_stage_analysis_is_an_input_alone_rate():
    # A generator at 1 ms per example states a 1,000/s term; its cut ran alone at 1,500/s.
    report = _report(
        [
            _stat(0, StageKind.SOURCE, "from_generator(read)", 1 / 1e-3, 1e-3),
            _stat(1, StageKind.MAP, "map(f)", 1 / 1.01e-3, 1e-3 + 1e-6),
        ]
    )
    measured = {"end to end": 900.0, STAGE_ANALYSIS: 1_500.0}
    model = pipeline_model(report, 2, 800.0, 1e-4, measured=measured)

    # It lifts the stage's term but not the model's 800/s, and the Limit line says so.
    assert model is not None and model.limit.bound_by is LimitBound.MEASURED
    assert model.limit.examples_per_sec == 900.0
    assert "1,500 examples/s (stage analysis)" in model.limit.bound_words
    stage_terms = [t for t in model.limit.terms if t.bound_by is LimitBound.SEQUENTIAL_STAGE]
    assert all(t.examples_per_sec >= 1_500.0 for t in stage_terms)


def test_the_limit_line_names_the_pipeline_only_rate_where_both_input_rates_ran_above_it():
    # The throughput table shows the pipeline-only phase: where it too ran above the limit,
    # the Limit line names it rather than the stage analysis's faster cut.
    report = _report([_stat(0, StageKind.SOURCE, "from_generator(read)", 1 / 1e-3, 1e-3)])
    measured = {"end to end": 900.0, PIPELINE_ONLY: 1_200.0, STAGE_ANALYSIS: 1_500.0}
    model = pipeline_model(report, 2, 800.0, 1e-4, measured=measured)

    assert model is not None and model.limit.examples_per_sec == 900.0
    assert "1,200 examples/s (pipeline only)" in model.limit.bound_words
    below = {"end to end": 900.0, PIPELINE_ONLY: 850.0, STAGE_ANALYSIS: 1_500.0}
    model = pipeline_model(report, 2, 800.0, 1e-4, measured=below)
    assert model is not None and "1,500 examples/s (stage analysis)" in model.limit.bound_words


@pytest.mark.parametrize("seed", range(20))
def test_the_limit_is_never_below_a_measured_rate(seed):
    import random

    rng = random.Random(seed)
    stats = [_stat(0, StageKind.SOURCE, "range", 1 / 10e-6, 10e-6)]
    time_s, cpu_s = 10e-6, 10e-6
    kinds = [
        (StageKind.MAP, "map(f{})"),
        (StageKind.FILTER, "filter(g{})"),
        (StageKind.BATCH, "batch({})"),
        (StageKind.PREFETCH, "prefetch({})"),
    ]
    for index in range(1, 5):
        kind, label = rng.choice(kinds)
        time_s += rng.uniform(0, 2e-3)
        cpu_s += rng.uniform(0, 1e-3)
        parameters = {"num_parallel_calls": rng.choice([1, 2])} if rng.random() < 0.5 else {}
        stats.append(_stat(index, kind, label.format(index), 1 / time_s, cpu_s, parameters))
    measured = {"end to end": rng.uniform(100, 5_000), "pipeline only": rng.uniform(100, 9_000)}
    model = pipeline_model(_report(stats), rng.choice([1, 2, 8]), 4_000.0, 1e-4, measured=measured)

    assert model is not None
    assert model.limit.examples_per_sec >= 0.95 * measured["end to end"]
    alone = [t for t in model.limit.terms if t.bound_by in (LimitBound.SEQUENTIAL_STAGE,)]
    assert all(t.examples_per_sec >= 0.95 * measured["pipeline only"] for t in alone)
    # A limit below the input alone says so on its line.
    if model.limit.examples_per_sec < measured["pipeline only"]:
        assert "(pipeline only)" in model.limit.bound_words
