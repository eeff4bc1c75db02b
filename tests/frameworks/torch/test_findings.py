"""The checked pass's records become findings in the DataLoader's words, only when wrong."""

from __future__ import annotations

import dataclasses

import pytest

from tfperf.frameworks.torch._findings import (
    CHANGED_DATA_WEIGHT,
    loader_findings,
    with_check_notes,
)
from tfperf.knobs import KNOBS
from tfperf.results.findings import Evidence, Finding, Level
from tfperf.results.stages import LoaderReport, PassCheck, WorkerMemory

MIB = 2**20
DOUBLED = PassCheck("Lines", 2, 48, True, 24, True, repeat_factor=2.0, sampled=24)
SHARDED = PassCheck("Lines", 2, 24, True, 24, True, repeat_factor=1.0, sampled=24)
GROWN = WorkerMemory(2, 2 * 20 * MIB, 2 * 60 * MIB, 99, 100, True, 0, MIB, 100 * MIB)


def test_duplicated_data_leads_with_its_fix_and_evidence() -> None:
    (found,) = loader_findings(LoaderReport(2, False, pass_check=DOUBLED))
    assert (found.rule, found.level, found.origin) == ("changed-data", Level.FIX, "torch")
    assert found.text == DOUBLED.text() and found.fix == DOUBLED.fix()
    assert found.weight == CHANGED_DATA_WEIGHT == 1.0
    assert (found.evidence.samples, found.evidence.unit) == (48, "examples")


def test_memory_growth_is_a_finding_and_intact_data_is_none() -> None:
    report = LoaderReport(2, False, item_function="Rows.__getitem__", worker_memory=GROWN,
                          pass_check=SHARDED)  # fmt: skip
    (found,) = loader_findings(report)
    assert found.rule == "worker-memory-growth" and "`Lines`'s pages" in found.text
    assert found.fix == GROWN.growth_fix()
    assert loader_findings(LoaderReport(2, False)) == []


def test_a_fix_that_keeps_the_workers_says_what_to_check() -> None:
    restarts = Finding(
        "restarts", Level.FIX, "Steps wait 60% of a real epoch, mostly at restarts.",
        "Pass persistent_workers=True to the DataLoader, so its workers outlive each epoch.",
        Evidence("end_to_end", 4, None, unit="restarts"), weight=0.6,
    )  # fmt: skip
    other = dataclasses.replace(restarts, rule="input-slower-than-model", fix="Use more workers.")
    (noted,) = with_check_notes([restarts, other])
    note = KNOBS["persistent_workers"].check_note
    assert note is not None and noted.fix == f"{restarts.fix} {note}"
    assert (noted.rule, noted.origin, noted.weight) == ("restarts", "torch", 0.6)
    assert with_check_notes([noted]) == []  # said once
    said = dataclasses.replace(restarts, fix=f"{restarts.fix} (check that set_epoch still acts)")
    assert with_check_notes([said]) == []  # the fix already says what to check


def _streamed(passes: list[list[int]], workers: int = 4, check: PassCheck | None = SHARDED):
    """`worker_shards` on an end-to-end window of `passes` (each its batches' sizes), the last
    pass cut short by the window's end."""
    from tests.fakes.trials import fake_result
    from tfperf.frameworks.torch._findings import worker_shards
    from tfperf.knobs import Knobs
    from tfperf.results import StepRecord

    result = fake_result(Knobs(batch_size=8), wait_s=0.01)
    sizes = [(epoch, size) for epoch, batches in enumerate(passes) for size in batches]
    records = [StepRecord(0.01 * i, 0.005, 0.005, n, e, False) for i, (e, n) in enumerate(sizes)]
    result.end_to_end = dataclasses.replace(result.end_to_end, records=records)
    return worker_shards(result, LoaderReport(workers, False, pass_check=check))


def test_a_stream_whose_workers_each_end_short_is_told_what_training_sees() -> None:
    # 4 workers each batch their 30 of 120 examples: 3 batches of 8 and one of 6 each.
    pass_ = [8] * 12 + [6] * 4
    found = _streamed([pass_, pass_, pass_[:5]])
    assert found is not None and (found.rule, found.level) == ("worker-shards", Level.NOTE)
    assert found.text.startswith(
        "Each of the 4 workers batches its own share of Lines's stream, so a pass ends in 4 "
        "short batches (6 examples) of 16, where one stream ends in one at most"
    )
    assert found.fix.endswith("a multiple of 8 examples makes none; drop_last=True drops "
                              "them (24 examples a pass).")  # fmt: skip
    assert (found.evidence.samples, found.evidence.unit) == (2, "passes")  # the cut one aside
    # One short batch a pass is what one stream makes: nothing to say. Nor with one worker, a
    # map-style dataset (no pass check: a sampler fills its batches), or no whole pass.
    assert _streamed([[8] * 14 + [2], [8] * 14 + [2], [8]]) is None
    assert _streamed([pass_, pass_, [8]], workers=1) is None
    assert _streamed([pass_, pass_, [8]], check=None) is None
    assert _streamed([pass_]) is None


def test_a_loaders_wait_mostly_at_restarts_points_to_them_before_more_workers() -> None:
    """Tiny epochs with workers started each pass: the wait is mostly where a pass starts,
    and more workers would make each start dearer. The rates finding ranks by the wait
    between restarts, and advises items only where that wait still counts."""
    from tests.reports import fake_profile
    from tfperf.frameworks.torch._limit import rate_finding
    from tfperf.results.stages import RestartEvidence

    loader = LoaderReport(2, False, item_function="Rows.__getitem__", wall_s_per_item=1e-5,
                          cpu_s_per_item=1e-5, workers_estimate=4)  # fmt: skip
    result = fake_profile()
    plain = rate_finding(result, loader)
    assert plain is not None and plain.fix is not None and plain.fix.startswith("Each item")
    for steady, level in ((0.02, Level.NOTE), (0.3, Level.FIX)):
        cost = dataclasses.replace(
            _restart_cost(), steady_wait_fraction=steady, evidence=RestartEvidence.ENOUGH
        )
        assert cost.dominates
        found = rate_finding(dataclasses.replace(result, restarts=cost), loader)
        assert found is not None and found.fix is not None and found.level is level
        assert found.fix.startswith("Most of it is spent where each pass starts again")
        assert ("searches num_workers" in found.fix) is (level is Level.FIX)
        assert found.weight == steady * 0.9


def _restart_cost():
    from tfperf.measure._analysis import summarise_phase
    from tfperf.measure._restarts import restart_cost
    from tfperf.results import Phase, StepRecord

    records, start = [], 0.0
    for number in range(5):
        for position in range(3):
            wait = 0.05 if position == 0 else 0.001
            records.append(StepRecord(start, wait, 0.002, 32, number, not records))
            start += wait + 0.002
    cost = restart_cost(summarise_phase(Phase.END_TO_END, records, 0.0, True, 4))
    assert cost is not None
    return cost


def test_contention_is_said_in_the_dataloaders_words() -> None:
    # num_workers=0 loads each batch between steps: nothing runs beside a step, so a slower
    # step is a note that blames no input work for the cores, and has no fix. With workers,
    # they load on the cores the step computes on: a fix in the loader's terms.
    from tests.reports import fake_profile
    from tfperf.frameworks.torch._limit import contention_finding

    result = dataclasses.replace(fake_profile(), compute_slowdown=4.2)
    assert (
        contention_finding(
            dataclasses.replace(result, compute_slowdown=1.1), LoaderReport(0, False)
        )
        is None
    )
    without = contention_finding(result, LoaderReport(0, False))
    assert without is not None and without.level is Level.NOTE and without.fix is None
    assert "with num_workers=0 the DataLoader loads each batch between steps" in without.text
    assert "competes" not in without.text
    beside = contention_finding(result, LoaderReport(2, False))
    assert beside is not None and beside.level is Level.FIX and beside.fix is not None
    assert "the DataLoader's 2 workers load items on the cores the step computes on" in beside.text
    assert beside.fix.startswith("Cheaper items or fewer workers would speed up training too")
    assert "cache decoded data" not in beside.fix and "threads" not in beside.fix
    assert beside.weight == pytest.approx((1 - result.input_wait_fraction) * (1 - 1 / 4.2))


def test_items_that_wait_are_not_said_to_take_the_steps_cores() -> None:
    # Items that sleep on a read use little CPU: fewer workers would only slow the input, so
    # the slower step is a note that says tfperf cannot tell its cause, with no fix.
    from tests.reports import fake_profile
    from tfperf.frameworks.torch._limit import contention_finding

    result = dataclasses.replace(fake_profile(), compute_slowdown=3.2)
    waiting = LoaderReport(4, False, wall_s_per_item=0.00109, cpu_s_per_item=0.0000286)
    found = contention_finding(result, waiting)
    assert found is not None and found.level is Level.NOTE and found.fix is None
    assert "items mostly wait (1.09 ms each, 0.0286 ms of it CPU)" in found.text
    assert "its 4 workers take little of the cores" in found.text
    # With a collate call timed, the figures are still the items' own, as the rates
    # finding gives them: one figure, one source.
    from tfperf.frameworks.torch._limit import _items_advice

    collated = dataclasses.replace(
        waiting, collate_wall_s_per_batch=0.0002, collate_cpu_s_per_batch=0.0002, items_per_batch=4
    )
    note = contention_finding(result, collated)
    assert note is not None and "(1.09 ms each, 0.0286 ms of it CPU)" in note.text
    assert "takes 1.09 ms, 0.0286 ms of it CPU" in _items_advice(collated)
    computing = dataclasses.replace(waiting, cpu_s_per_item=0.001)
    beside = contention_finding(result, computing)
    assert beside is not None and beside.level is Level.FIX
