"""The generated family (tests/generated.py) against the rules that need no clock.

Memory by buffer is read from each member's real dataset; restart attribution runs on the
first-element times and rates the member's set costs make. The rules that need a clock
(verdict, limiting stage, limit >= best measured) are checked by `python -m
benchmarks.generated`, on a quiet machine.
"""

from __future__ import annotations

import dataclasses
import types

import pytest

from tests.fakes.stages import first_element_stat
from tests.generated import Generated, family
from tfperf.measure._restarts import attribute
from tfperf.results.stages import (
    EpochSource,
    RestartCost,
    StageKind,
    StageStat,
    memory_account,
)

tf = pytest.importorskip("tensorflow")

_KINDS = {
    "range": StageKind.SOURCE,
    "shuffle": StageKind.SHUFFLE,
    "map": StageKind.MAP,
    "batch": StageKind.BATCH,
    "prefetch": StageKind.PREFETCH,
}


def _dataset(member: Generated):
    namespace: dict[str, object] = {}
    exec(compile(member.source(), f"{member.name}.py", "exec"), namespace)
    return namespace["make_dataset"](types.SimpleNamespace(batch_size=member.batch))


@pytest.mark.parametrize("member", family(), ids=lambda m: m.name)
def test_memory_by_buffer_is_within_a_quarter_of_the_truth(member: Generated):
    from tfperf.frameworks.tensorflow._buffers import buffer_holds
    from tfperf.frameworks.tensorflow._chain import recover_stages

    holds = {
        hold.stage: hold.bytes for hold in buffer_holds(recover_stages(_dataset(member)), None, 2)
    }
    truth = member.truth().holds
    assert set(holds) == set(truth)
    for label, expected in truth.items():
        assert holds[label] == pytest.approx(expected, rel=0.25), label


def _stats(member: Generated) -> list[StageStat]:
    stats = []
    for index, (label, (first_s, rate)) in enumerate(member.first_element_s().items()):
        kind = _KINDS[label.split("(")[0]]
        parameters = {"batch_size": member.batch} if kind is StageKind.BATCH else {}
        if kind is StageKind.MAP:
            parameters = {"num_parallel_calls": member.parallelism}
        stats.append(first_element_stat(index, kind, label, first_s, rate, parameters, 100))
    return stats


_ANY_COST = RestartCost(
    restarts=2,
    seconds_per_restart=0.1,
    stage="shuffle(1)",
    stage_kind=StageKind.SHUFFLE,
    steady_wait_s_per_step=0.0,
    steady_wait_fraction=0.0,
    weighted_wait_fraction=0.5,
    window_wait_share=1.0,
    epoch_steps=4,
    epoch_source=EpochSource.OBSERVED,
    weighted_examples_per_sec=1.0,
)


@pytest.mark.parametrize("member", [m for m in family() if not m.infinite], ids=lambda m: m.name)
def test_a_restart_is_attributed_to_the_stage_the_costs_make_late(member: Generated):
    cost = attribute(_ANY_COST, _stats(member))
    assert cost.stage == member.truth().restart_stage
    assert cost.stage_sequential == (cost.stage_kind is StageKind.MAP and member.parallelism == 1)


def test_the_bench_checks_a_profile_against_the_truth_and_names_each_miss():
    from benchmarks.generated import _checks
    from tests.generated import by_name
    from tests.reports import fake_profile
    from tfperf.results import Verdict
    from tfperf.results.stages import BufferHold, BufferKind, SizeSource, StageReport

    member = by_name("four_files")
    truth = member.truth()
    holds = [
        BufferHold(label, BufferKind.SHUFFLE, None, 1, size, SizeSource.SPEC)
        for label, size in truth.holds.items()
    ]
    stats = _stats(member)
    report = StageReport(stats, 2, 2, None, 0.5, 0.2, 3.0, None, "")
    restart = attribute(_ANY_COST, stats)
    result = dataclasses.replace(
        fake_profile(),
        verdict=Verdict.HIGHLY_INPUT_BOUND,
        stages=report,
        restarts=restart,
        memory=memory_account(holds, None, None),
    )
    assert [c.name for c in _checks(member, result) if not c.passed] == []
    wrong = dataclasses.replace(result, verdict=Verdict.COMPUTE_BOUND, memory=None)
    missed = [c.name for c in _checks(member, wrong) if not c.passed]
    assert missed == ["verdict", "memory of shuffle(256)", "memory of prefetch(1)"]
