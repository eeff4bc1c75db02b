"""The rules that make findings: each states what the figures back, and stays silent where its
preconditions fail."""

from __future__ import annotations

import dataclasses

import pytest

from tests.reports import fake_profile
from tfperf.findings import conclude
from tfperf.findings._rules import supply
from tfperf.measure._analysis import summarise_phase
from tfperf.measure._restarts import EpochInfo, restart_cost
from tfperf.report import render_answer, render_profile_html, render_summary
from tfperf.results import Phase, PhaseResult, ProfileResult, StepRecord, Verdict
from tfperf.results.findings import Finding, Level
from tfperf.results.stages import (
    BatchShape,
    BufferHold,
    BufferKind,
    EpochSource,
    SizeSource,
    StageKind,
    StageReport,
    StageStat,
    memory_account,
)


def _rules(result: ProfileResult) -> dict[str, str]:
    return {f.rule: f.sentence for f in conclude(result).findings}


def _with_prefetch(result: ProfileResult, prefetch: int) -> ProfileResult:
    return dataclasses.replace(result, knobs={**result.knobs, "prefetch": prefetch})


def test_input_slower_than_the_model_is_said_with_both_rates():
    result = fake_profile()  # 20 ms a batch of 4 in, 10 ms a step: 200 vs 400 examples/s
    said = _rules(result)["input-slower-than-model"]
    assert "delivers 200 examples/s but the model could consume 400" in said


def test_prefetch_zero_is_said_only_without_a_prefetch():
    result = fake_profile()
    assert "prefetch-zero" in _rules(_with_prefetch(result, 0))
    assert "prefetch-zero" not in _rules(_with_prefetch(result, 2))


def test_a_compute_bound_profile_gets_a_note_and_no_input_fix():
    result = dataclasses.replace(
        fake_profile(),
        verdict=Verdict.COMPUTE_BOUND,
        input_wait_fraction=0.01,
        pipeline_only=None,
        speedup_if_input_free=1.0,
    )
    found = conclude(result).findings
    assert [f.rule for f in found if f.level is Level.FIX] == []
    assert any(f.rule == "compute-bound" for f in found)


def _hold(kind: BufferKind, elements: int, size: float, **extra) -> BufferHold:
    return BufferHold(
        f"{kind.value}({elements})", kind, None, elements, size, SizeSource.SPEC, **extra
    )


def test_a_large_fixed_prefetch_gets_advice_and_an_autotuned_one_does_not():
    big = _hold(BufferKind.PREFETCH, 1024, 384 * 1024.0)
    result = dataclasses.replace(fake_profile(), memory=memory_account([big], 2**30, None))
    assert "prefetch(tf.data.AUTOTUNE) sizes it" in _rules(result)["memory"]
    tuned = dataclasses.replace(big, note="AUTOTUNE chose 1024")
    result = dataclasses.replace(fake_profile(), memory=memory_account([tuned], 2**30, None))
    assert "prefetch(tf.data.AUTOTUNE) sizes it" not in _rules(result).get("memory", "")


def test_a_buffer_account_above_the_peak_rss_prints_no_share_above_the_whole():
    big = _hold(BufferKind.SHUFFLE, 1000, 4 * 2**20)
    result = conclude(
        dataclasses.replace(fake_profile(), memory=memory_account([big], 2**30, None))
    )
    text = render_summary(result)
    assert "never full while profiled" in text
    assert "390%" not in text and "% of the 1 GiB" not in text


def test_the_answer_is_short_and_the_html_carries_every_finding():
    result = conclude(_with_prefetch(fake_profile(), 0))
    answer = render_answer(result)
    assert len([line for line in answer.splitlines() if line.strip()]) <= 20
    assert answer.count("[fix]") + answer.count("[note]") + answer.count("[caution]") <= 3
    html = render_profile_html(result)
    for finding in result.findings:
        assert f'data-rule="{finding.rule}"' in html


def test_the_answer_keeps_to_its_lines_with_every_section_asked_for():
    from tests.report.test_scaling import FEEDS_TWO, curve
    from tfperf.results._utilisation import (
        MLPERF_STORAGE_BAR,
        StepSource,
        Utilisation,
        UtilisationPoint,
    )

    point = UtilisationPoint(0.002, StepSource.EMULATED, 0.2, 0.2)
    utilisation = Utilisation(MLPERF_STORAGE_BAR, 0.0025, 0.00225, [point], True)
    result = dataclasses.replace(
        conclude(_with_prefetch(fake_profile(), 0)),
        scaling=curve(*FEEDS_TWO),
        emulated_step_s=0.002,
        utilisation=utilisation,
    )
    answer = render_answer(result)
    assert len([line for line in answer.splitlines() if line.strip()]) <= 20
    assert "Scaling with replicas" in answer and "[fix]" in answer


def test_a_restart_waiting_on_a_map_autotune_runs_in_parallel_is_not_told_one_thread():
    from tfperf.findings._restart_words import restart_finding
    from tfperf.results.stages import EpochSource, RestartCost, RestartEvidence, StageKind

    cost = RestartCost(
        restarts=20,
        seconds_per_restart=0.03,
        stage="map(decode)",
        stage_kind=StageKind.MAP,
        steady_wait_s_per_step=0.0001,
        steady_wait_fraction=0.01,
        weighted_wait_fraction=0.9,
        window_wait_share=0.98,
        epoch_steps=2,
        epoch_source=EpochSource.CARDINALITY,
        weighted_examples_per_sec=100.0,
        measured=True,
        stage_own_s=0.03,
        stage_sequential=True,
        evidence=RestartEvidence.ENOUGH,
    )
    parallel = restart_finding(cost, threads=2)
    assert parallel is not None and "one thread" not in parallel.sentence
    assert "repeat()" in parallel.sentence
    single = restart_finding(cost, threads=1)
    assert single is not None and "num_parallel_calls=tf.data.AUTOTUNE" in single.sentence


def test_a_budget_that_left_stages_unmeasured_places_the_limit_at_or_before_a_cut():
    from tests.fakes.stages import first_element_stat
    from tfperf.results.stages import StageKind, StageReport

    def stage(index: int, kind: StageKind, label: str, rate: float | None):
        measured = first_element_stat(index, kind, label, 0.01, rate or 1.0)
        if rate is None:
            return dataclasses.replace(measured, examples_per_sec=None, elements_per_sec=None)
        return measured

    stages = [
        stage(0, StageKind.SOURCE, "range", None),
        stage(1, StageKind.MAP, "map(decode)", 4000.0),
        stage(2, StageKind.MAP, "map(shift)", None),
        stage(3, StageKind.PREFETCH, "prefetch(1)", 3300.0),
    ]
    report = StageReport(stages, None, None, None, 0.2, 0.2, 2.4, None, "", unmeasured=[0, 2])
    found = {
        f.rule: f for f in conclude(dataclasses.replace(fake_profile(), stages=report)).findings
    }
    said = found["limit-at-or-before"].text
    assert said.startswith("The limit lies at or before map(decode)")
    assert "cannot tell which of range, map(decode)" in said
    assert "limiting-stage" not in found


def _passes(first_s: float, phase: Phase, passes: int = 5) -> PhaseResult:
    """Passes of 4 batches of 8 whose first waits `first_s` (a refill), the rest 10 ms; the
    first record is warm-up."""
    records: list[StepRecord] = []
    for number in range(passes):
        for position in range(4):
            wait = first_s if position == 0 else 0.01
            start = sum(r.step_s for r in records)
            records.append(StepRecord(start, wait, 0.0, 8, number, not records))
    return summarise_phase(phase, records, 0.0, True, passes - 1)


def test_the_input_alone_reads_as_its_phase_where_every_pass_was_a_real_epoch():
    # A dataset of 4 batches: the window's passes are its real epochs, so the rate the table
    # shows for the pipeline alone already counts one refill per epoch; a second estimate of
    # it (steady steps plus the restart cost) would print a different figure for one rate.
    alone = _passes(0.05, Phase.PIPELINE_ONLY)
    cost = restart_cost(_passes(0.06, Phase.END_TO_END), EpochInfo(4, EpochSource.CARDINALITY))
    assert cost is not None and cost.epoch_steps == 4
    result = dataclasses.replace(fake_profile(), pipeline_only=alone, restarts=cost)
    assert supply(result) == alone.examples_per_sec
    # An epoch given ten times longer than the data the window read: weighed by it, the
    # input alone restarts a tenth as often and delivers more.
    given = restart_cost(_passes(0.06, Phase.END_TO_END), EpochInfo(40, EpochSource.GIVEN))
    assert given is not None
    longer = supply(dataclasses.replace(result, restarts=given))
    assert longer is not None and longer > 1.2 * alone.examples_per_sec
    # Two figures for the input alone, then: the sentence says which is which.
    said = _rules(dataclasses.replace(result, restarts=given))
    rates = said.get("input-slower-than-model") or said["input-keeps-up-alone"]
    assert f"{longer:,.0f} examples/s over a real epoch of 40 steps" in rates
    assert f"({alone.examples_per_sec:,.0f} over the window, as the table shows)" in rates
    assert "over a real epoch" not in " ".join(_rules(result).values())


def test_an_input_alone_weighed_within_the_noise_of_its_phase_is_the_phase_figure():
    # A generator's window read 1.25 passes of its epoch: weighed by the epoch, the input
    # alone came out 0.1% from the phase's own rate. One rate, one figure: the table's.
    alone = _passes(0.011, Phase.PIPELINE_ONLY, passes=2)
    cost = restart_cost(_passes(0.06, Phase.END_TO_END), EpochInfo(5, EpochSource.GIVEN))
    assert cost is not None
    result = dataclasses.replace(fake_profile(), pipeline_only=alone, restarts=cost)
    assert supply(result) == alone.examples_per_sec


def _retracing(shapes: list[BatchShape]) -> Finding | None:
    result = dataclasses.replace(fake_profile(), batch_shapes=shapes)
    return next((f for f in conclude(result).findings if f.rule == "retracing"), None)


def test_a_short_last_batch_compiled_once_is_a_note_that_names_the_drop():
    # 18 whole batches and a short last one per pass: the first shape's first step is the
    # step's first compile (never counted), the short batch's first step compiled again.
    shapes = [
        BatchShape("(32, 48, 48, 3), (32,)", 90, 32, first_compute_s=1.2, typical_compute_s=0.009),
        BatchShape("(24, 48, 48, 3), (24,)", 5, 24, first_compute_s=0.7, typical_compute_s=0.008),
    ]
    found = _retracing(shapes)
    assert found is not None and found.level is Level.NOTE
    assert "the first batch of 24 examples took 692 ms longer than the later ones" in found.text
    assert "paid once a run" in found.text
    assert found.fix is not None and "drop_remainder=True" in found.fix
    assert found.weight < 0.05  # below the costs paid every step
    # The same short batch no slower at its first step: no compile, nothing said; nor for the
    # first shape's own first compile.
    steady = dataclasses.replace(shapes[1], first_compute_s=0.012)
    assert _retracing([shapes[0], steady]) is None
    # Arrays given to fit: Keras batches them, and no drop_remainder reaches that batch.
    from tfperf.results.discovery import Discovery

    arrays = Discovery(end="train.py:9", fit_gets_arrays=True)
    result = dataclasses.replace(fake_profile(), batch_shapes=shapes, discovery=arrays)
    (told,) = [f for f in conclude(result).findings if f.rule == "retracing"]
    assert told.fix is not None and "a batch_size that divides the examples" in told.fix
    assert "drop_last" not in told.fix


def test_shapes_that_keep_coming_new_are_a_fix_to_pad():
    # Padded to each batch's longest sequence: one shape came again and compiled again, three
    # came once; each new shape compiles again.
    shapes = [
        BatchShape("(16, 40)", 6, 16, first_compute_s=0.9, typical_compute_s=0.01),
        BatchShape("(16, 52)", 3, 16, first_compute_s=0.5, typical_compute_s=0.01),
        *(BatchShape(f"(16, {n})", 1, 16, 0.5, None) for n in (61, 33, 47)),
    ]
    found = _retracing(shapes)
    assert found is not None and found.level is Level.FIX
    assert "3 more shapes came only once in the window" in found.text
    assert found.fix is not None and "Pad to a few fixed lengths" in found.fix
    assert "drop_remainder" not in found.fix


def _stages(*stages: tuple[StageKind, str, tuple[str, ...]]) -> StageReport:
    from tests.fakes.stages import first_element_stat

    stats = [
        dataclasses.replace(
            first_element_stat(index, kind, label, 0.01, 1000.0 * (index + 1)), draws_random=drawn
        )
        for index, (kind, label, drawn) in enumerate(stages)
    ]
    return StageReport(stats, None, None, None, 0.2, 0.2, 2.4, None, "")


def _frozen(report: StageReport) -> list[Finding]:
    found = conclude(dataclasses.replace(fake_profile(), stages=report)).findings
    return [f for f in found if f.rule == "frozen-draws"]


def test_a_cache_after_a_random_map_says_every_later_epoch_sees_the_first_draws():
    report = _stages(
        (StageKind.SOURCE, "range", ()),
        (StageKind.MAP, "map(decode)", ()),
        (StageKind.MAP, "map(augment)", ("RandomUniform",)),
        (StageKind.CACHE, "cache", ()),
        (StageKind.BATCH, "batch(4)", ()),
    )
    (finding,) = _frozen(report)
    assert finding.level is Level.FIX
    assert "map(augment) draws random numbers (RandomUniform)" in finding.text
    assert "every later epoch trains on the examples the first epoch drew" in finding.text
    assert finding.fix is not None and finding.fix.startswith("Put cache() before map(augment)")
    # The pipeline's rate up to the map beside what the model consumes (fake_profile: 400).
    assert "ran at 3,000 examples/s alone; the model consumes 400" in finding.fix


def _frozen_order(*stages: tuple[StageKind, str, tuple[str, ...]]) -> list[Finding]:
    found = conclude(dataclasses.replace(fake_profile(), stages=_stages(*stages))).findings
    return [f for f in found if f.rule == "frozen-order"]


def test_a_cache_after_a_shuffle_says_every_epoch_trains_in_the_first_order():
    source, decode = (StageKind.SOURCE, "range", ()), (StageKind.MAP, "map(decode)", ())
    cache, batch = (StageKind.CACHE, "cache", ()), (StageKind.BATCH, "batch(4)", ())
    shuffle = (StageKind.SHUFFLE, "shuffle(2048)", ())
    (finding,) = _frozen_order(source, decode, shuffle, cache, batch)
    assert finding.level is Level.FIX and finding.hazard
    assert finding.text.startswith("The cache() after shuffle(2048) keeps the order the first")
    assert "every epoch trains in the same order" in finding.text
    assert finding.fix is not None and "`.cache().shuffle(buffer_size)`" in finding.fix
    # Shuffled after the cache, before it, or a shuffle written to keep one order: nothing.
    assert _frozen_order(source, decode, cache, shuffle, batch) == []
    assert _frozen_order(source, shuffle, decode, cache, shuffle, batch) == []
    assert _frozen_order(source, decode, batch) == []
    report = _stages(source, decode, shuffle, cache, batch)
    once = dataclasses.replace(
        report.stages[2], parameters={"buffer_size": 2048, "reshuffle_each_iteration": False}
    )
    report = dataclasses.replace(report, stages=[*report.stages[:2], once, *report.stages[3:]])
    found = conclude(dataclasses.replace(fake_profile(), stages=report)).findings
    assert [f for f in found if f.rule == "frozen-order"] == []


def test_a_cache_before_the_random_map_or_a_second_cache_after_it_freezes_nothing_new():
    before = _stages(
        (StageKind.SOURCE, "range", ()),
        (StageKind.CACHE, "cache", ()),
        (StageKind.MAP, "map(augment)", ("RandomUniform",)),
    )
    assert _frozen(before) == []
    twice = _stages(
        (StageKind.MAP, "map(augment)", ("RandomUniform",)),
        (StageKind.CACHE, "cache", ()),
        (StageKind.MAP, "map(scale)", ()),
        (StageKind.CACHE, "cache", ()),
    )
    assert [f.text.split(":")[0] for f in _frozen(twice)] == [
        "The cache() after map(augment) keeps what the first pass made"
    ]


def test_contention_ranks_by_the_share_of_a_step_it_costs():
    # A streaming script: steps wait 92% of the time, and compute 2.9x slower end to end than
    # on cached batches. The slowdown costs 8% x (1 - 1/2.9) of a step, not 65%.
    result = dataclasses.replace(fake_profile(), input_wait_fraction=0.92, compute_slowdown=2.9)
    found = {f.rule: f for f in conclude(result).findings}
    assert found["contention"].weight == pytest.approx(0.08 * (1 - 1 / 2.9))
    assert found["contention"].weight < found["input-slower-than-model"].weight


def test_shapes_that_settle_after_a_compile_are_a_note_and_a_few_ms_is_no_compile():
    # padded_batch of variable-length token lists under Keras's fit (shapes as measured):
    # (64, 195) compiled again; (64, 190) ran 9.5 ms against 4.4 ms, a short step's jitter;
    # the other later shapes ran their first batch at their usual time.
    shapes = [
        BatchShape("(64, 199), (64,)", 46, 64, first_compute_s=0.567, typical_compute_s=0.0052),
        BatchShape("(64, 195), (64,)", 23, 64, first_compute_s=0.1895, typical_compute_s=0.0052),
        BatchShape("(64, 193), (64,)", 9, 64, first_compute_s=0.0067, typical_compute_s=0.0055),
        BatchShape("(64, 190), (64,)", 3, 64, first_compute_s=0.0095, typical_compute_s=0.0044),
        BatchShape("(64, 188), (64,)", 1, 64, 0.0059, None),
    ]
    found = _retracing(shapes)
    assert found is not None and found.level is Level.NOTE
    assert "the first batch of shape (64, 195), (64,) took 184 ms longer" in found.text
    assert "2 other later shapes ran their first batch at the usual time" in found.text
    assert "each new shape compiles again" not in found.text
    assert found.weight < 0.05


def test_contention_beside_a_stage_that_runs_python_names_the_interpreter_lock():
    from tests.fakes.stages import first_element_stat

    generator = dataclasses.replace(
        first_element_stat(0, StageKind.SOURCE, "from_generator(samples)", 0.01, 2000.0),
        calls_python=True,
    )
    report = StageReport([generator], None, None, None, 0.2, 0.2, 2.4, None, "")
    result = dataclasses.replace(fake_profile(), compute_slowdown=3.8, stages=report)
    found = {f.rule: f for f in conclude(result).findings}["contention"]
    assert "and for Python's interpreter lock (from_generator(samples) runs Python" in found.text
    assert found.fix is not None and "TensorFlow ops in place of Python" in found.fix
    plain = dataclasses.replace(result, stages=None)
    said = {f.rule: f for f in conclude(plain).findings}["contention"].text
    assert "interpreter lock" not in said


def test_whether_the_pipeline_prefetches_is_unknown_without_stages_or_a_knob():
    # A script profiled with --no-stages: no stage graph and no prefetch knob, so tfperf
    # does not know, and the input that keeps up alone is not told to add a prefetch.
    from tests.fakes.stages import first_element_stat
    from tfperf.findings._facts import PipelineFacts

    assert PipelineFacts.from_parts([]).has_prefetch() is None
    assert PipelineFacts.from_parts([], knob_prefetch=0).has_prefetch() is False
    assert PipelineFacts.from_parts([], knob_prefetch=2).has_prefetch() is True
    mapped = first_element_stat(0, StageKind.MAP, "map(f)", 0.01, 100.0)
    assert PipelineFacts.from_parts([mapped]).has_prefetch() is False
    prefetch = first_element_stat(1, StageKind.PREFETCH, "prefetch(1)", 0.01, 100.0)
    assert PipelineFacts.from_parts([mapped, prefetch]).has_prefetch() is True


def test_a_loader_with_worker_processes_leaves_contention_to_its_framework():
    # A DataLoader's workers are its framework's to speak of (torch's `contention_finding`):
    # the core's words (cache decoded data, fewer threads) are tf.data's.
    from tfperf.results.stages import LoaderReport

    result = dataclasses.replace(fake_profile(), compute_slowdown=4.2)
    assert "contention" in {f.rule for f in conclude(result).findings}
    for workers in (0, 2):
        loader = LoaderReport(workers=workers, persistent_workers=False)
        found = conclude(dataclasses.replace(result, loader=loader)).findings
        assert "contention" not in {f.rule for f in found}


def test_a_cache_after_an_endless_repeat_is_said_never_to_complete():
    def endless(*stages: tuple[StageKind, str, dict[str, int]]) -> list[Finding]:
        from tests.fakes.stages import first_element_stat

        stats = [
            first_element_stat(index, kind, label, 0.01, 1000.0, parameters)
            for index, (kind, label, parameters) in enumerate(stages)
        ]
        report = StageReport(stats, None, None, None, 0.2, 0.2, 2.4, None, "")
        found = conclude(dataclasses.replace(fake_profile(), stages=report)).findings
        return [f for f in found if f.rule == "endless-cache"]

    source, decode = (StageKind.SOURCE, "range", {}), (StageKind.MAP, "map(decode)", {})
    forever = (StageKind.REPEAT, "repeat", {"count": -1})
    cache, batch = (StageKind.CACHE, "cache", {}), (StageKind.BATCH, "batch(4)", {})
    (finding,) = endless(source, decode, forever, cache, batch)
    assert finding.level is Level.FIX
    assert finding.text.startswith("The cache() after repeat never completes")
    assert finding.fix is not None and "`.cache().repeat()`" in finding.fix
    # Cached first, a take() that ends the stream, a repeat with a count: it completes.
    assert endless(source, decode, cache, forever, batch) == []
    assert endless(source, forever, (StageKind.TAKE, "take(100)", {"count": 100}), cache) == []
    assert endless(source, (StageKind.REPEAT, "repeat(3)", {"count": 3}), cache, batch) == []


def test_the_reports_give_the_slowdown_the_contention_findings_reason():
    # The verbose text and the HTML state the slowdown as the contention finding reads it:
    # contention where it is a fix, not contention where it is a note (a DataLoader with no
    # workers loads between steps, never beside one).
    pytest.importorskip("torch")
    from tfperf.frameworks.torch._limit import contention_finding
    from tfperf.results.stages import LoaderReport

    result = conclude(dataclasses.replace(fake_profile(), compute_slowdown=4.2))
    loader = LoaderReport(0, False)
    alone = dataclasses.replace(result, loader=loader)
    note = contention_finding(alone, loader)
    assert note is not None
    alone = conclude(alone, framework=[note])
    competes = "input work competes with training for the CPU"
    not_contention = "not input work competing for the CPU here"
    for shown, said in ((result, False), (alone, True)):
        text, html = render_summary(shown), render_profile_html(shown)
        assert (not_contention in text) is said and (not_contention in html) is said
        assert (competes in text) is not said and (competes in html) is not said


def test_speeding_up_the_input_names_only_what_the_pipeline_lacks():
    # A map AUTOTUNE ran on 2 threads and a prefetch: only caching is left to name; with no
    # stage graph, the usual three; with nothing lacking, no list at all.
    from tests.fakes.stages import first_element_stat
    from tfperf.findings._facts import PipelineFacts
    from tfperf.findings._rules import _speed_up
    from tfperf.results.stages import AutotuneChoice, AutotuneReadout

    mapped = first_element_stat(
        1, StageKind.MAP, "map(aug)", 0.01, 100.0, {"num_parallel_calls": -1}
    )
    prefetch = first_element_stat(2, StageKind.PREFETCH, "prefetch(-1)", 0.01, 100.0)
    cache = first_element_stat(3, StageKind.CACHE, "cache", 0.01, 100.0)
    choice = AutotuneChoice(1, "map(aug)", "ParallelMapV2", "parallelism", None, 2, True)
    readout = AutotuneReadout([choice])
    tuned = PipelineFacts.from_parts([mapped, prefetch], readout)
    assert _speed_up(tuned) == (
        "Speed up the input (caching decoded data); `tfperf tune` searches these knobs."
    )
    assert "parallel map and reads, prefetch, caching decoded data" in _speed_up(
        PipelineFacts.from_parts([])
    )
    done = PipelineFacts.from_parts([mapped, prefetch, cache], readout)
    assert _speed_up(done).startswith("Make its costliest stage cheaper")
    # Written without parallelism, and AUTOTUNE's read-out chose none for it: one thread.
    sequential = dataclasses.replace(mapped, parameters={})
    one = PipelineFacts.from_parts([sequential, prefetch], AutotuneReadout([]))
    assert _speed_up(one).startswith("Speed up the input (parallel map and reads, caching")
    # Its threads not read: nothing said of them.
    unread = PipelineFacts.from_parts([sequential], None)
    assert _speed_up(unread).startswith("Speed up the input (prefetch, caching decoded data)")


def test_a_limiting_stage_no_call_of_the_users_made_is_said_to_come_from_a_library():
    # make_csv_dataset builds its own shuffle(10000): the user's code has no shuffle call,
    # so "use a smaller buffer_size" is said to go through the library function's arguments.
    from tfperf.results.discovery import ArgumentForm, CallSite, Discovery, Untunable

    def site(method: str, argument: str, calls: int = 1) -> CallSite:
        name = f"{method}@train.py:5.{argument}"
        return CallSite(name, "train.py", 5, 1, 5, 9, method, argument, ArgumentForm.ABSENT,
                        None, None, calls)  # fmt: skip

    from tests.reports import with_stages

    result = with_stages(fake_profile())  # limited by map(parse)
    library = "No call in your code makes map(parse): a library function you called built it"

    def fix(discovery: Discovery | None) -> str:
        concluded = conclude(dataclasses.replace(result, discovery=discovery))
        found = {f.rule: f for f in concluded.findings}
        return found["limiting-stage"].fix or ""

    assert library not in fix(None)
    assert library not in fix(Discovery())  # a file that reads its knobs: nothing was found
    batch_only = (site("batch", "batch_size"), site("map", "num_parallel_calls", calls=0))
    assert library in fix(Discovery(sites=batch_only))
    assert library not in fix(Discovery(sites=(site("map", "num_parallel_calls"),)))
    traced = Untunable("map(num_parallel_calls=...)", "a traced function", None, "traced")
    assert library not in fix(Discovery(sites=batch_only, untunable=(traced,)))


def test_contention_names_only_the_cheaper_input_the_pipeline_lacks():
    # A pipeline that caches after its decode is not told to cache decoded data; one whose
    # every parallel stage runs on one thread is not told to use fewer threads.
    from tests.fakes.stages import first_element_stat

    def fix(*stages: StageStat) -> str:
        report = StageReport(list(stages), None, None, None, 0.2, 0.2, 2.4, None, "")
        result = dataclasses.replace(fake_profile(), compute_slowdown=2.0, stages=report)
        found = {f.rule: f for f in conclude(result).findings}["contention"]
        return found.fix or ""

    source = first_element_stat(0, StageKind.SOURCE, "range", 0.01, 9000.0)
    one = first_element_stat(
        1, StageKind.MAP, "map(decode)", 0.01, 900.0, {"num_parallel_calls": 1}
    )
    many = dataclasses.replace(one, parameters={"num_parallel_calls": 8})
    cache = first_element_stat(2, StageKind.CACHE, "cache", 0.01, 900.0)
    assert fix(source, many) == (
        "Cheaper input (cache decoded data, fewer threads) would speed up training too."
    )
    assert fix(source, many, cache) == "Cheaper input (fewer threads) would speed up training too."
    assert fix(source, one, cache) == "Cheaper input would speed up training too."
    plain = dataclasses.replace(fake_profile(), compute_slowdown=2.0)
    (unknown,) = [f for f in conclude(plain).findings if f.rule == "contention"]
    assert (
        unknown.fix
        == "Cheaper input (cache decoded data, fewer threads) would speed up training too."
    )


def test_an_input_that_keeps_up_and_prefetches_is_not_said_to_lack_overlap():
    # Waiting beside an input that alone runs faster than the model: a pipeline that
    # prefetches is not told its input may not overlap compute; one without is told to add a
    # prefetch; where tfperf cannot tell, it names both causes.
    result = fake_profile()
    assert result.pipeline_only is not None and result.compute_only is not None
    fast = dataclasses.replace(
        result.pipeline_only, examples_per_sec=10 * result.compute_only.examples_per_sec
    )
    said = {}
    for prefetch in (2, 0, None):
        knobs = {**result.knobs, "prefetch": prefetch}
        if prefetch is None:
            del knobs["prefetch"]
        shown = dataclasses.replace(result, pipeline_only=fast, knobs=knobs)
        said[prefetch] = {f.rule: f for f in conclude(shown).findings}["input-keeps-up-alone"]
    overlap = "or input does not overlap compute"
    assert overlap not in said[2].text and said[2].fix is None
    assert overlap not in said[0].text and said[0].fix == "Add prefetch so input overlaps compute."
    assert overlap in said[None].text and said[None].fix is None


def test_a_step_that_compiles_nothing_is_not_said_to_compile_again():
    # An eager PyTorch step on bucketed batches: the first shape's first step took a few ms
    # beyond its later ones, and two later shapes' first steps well under a millisecond more.
    shapes = [
        BatchShape("(32, 51)", 80, 32, first_compute_s=0.0032, typical_compute_s=0.00017),
        BatchShape("(32, 63)", 4, 32, first_compute_s=0.0006, typical_compute_s=0.00018),
        BatchShape("(32, 29)", 3, 32, first_compute_s=0.0005, typical_compute_s=0.00016),
        BatchShape("(32, 44)", 2, 32, first_compute_s=0.00018, typical_compute_s=0.00017),
    ]
    assert _retracing(shapes) is None
