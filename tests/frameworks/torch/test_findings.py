"""The checked pass's records become findings in the DataLoader's words, only when wrong."""

from __future__ import annotations

import dataclasses

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
