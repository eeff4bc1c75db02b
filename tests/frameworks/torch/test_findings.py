"""The checked pass's records become findings in the DataLoader's words, only when wrong."""

from __future__ import annotations

from tfperf.frameworks.torch._findings import CHANGED_DATA_WEIGHT, loader_findings
from tfperf.results.findings import Level
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
