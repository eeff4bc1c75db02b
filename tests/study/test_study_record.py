"""The study's own attributes as one typed record, and studies the current release wrote."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest

import tfperf.study
from tfperf.hardware import Machine
from tfperf.knobs import Knobs
from tfperf.results.discovery import ArgumentForm, CallSite, Discovery
from tfperf.results.tune import Measurement, Objective, Reference
from tfperf.study._study import stored_remeasurement
from tfperf.study._study_record import RemeasureCover
from tfperf.study.cluster import Liveness
from tfperf.study.ledger import Ledger
from tfperf.study.records import StudyRecord, TrialRecord, read_study, write_study

STORED = Path(__file__).parent.parent / "stored"
MEASURED = Measurement("baseline", 0, {"batch_size": 8}, [10.0, 11.0], 100, None)
SITE = CallSite("map@p.py:3.num_parallel_calls", "p.py", 3, None, None, None, "map",
                "num_parallel_calls", ArgumentForm.KEYWORD, None, 1)  # fmt: skip


@pytest.fixture
def study(tmp_path) -> optuna.Study:
    return optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}", study_name="s")


def _stored_guide() -> dict:
    return json.loads((STORED / "guide-four-estimate-fields.json").read_text())


def test_a_study_as_the_current_release_writes_it_reads_into_the_record(study, tmp_path):
    """The attribute names and shapes below are what studies hold today; they must read."""
    study.set_user_attr("tfperf_pipeline", "pipeline.py")
    study.set_user_attr("tfperf_objective", "throughput-ram")
    study.set_user_attr("tfperf_references_enqueued", True)
    study.set_user_attr("tfperf_guide", _stored_guide())
    discovery = Discovery(sites=(SITE,))
    study.set_user_attr("tfperf_discovery", {"root": str(tmp_path), **discovery.to_dict()})
    study.set_user_attr("tfperf_remeasure", [
        {"label": "baseline", "trial_number": 0, "knobs": {"batch_size": 8},
         "examples_per_sec": [10.0, 11.0], "peak_rss_bytes": 100, "peak_gpu_bytes": None},
    ])  # fmt: skip
    study.set_user_attr("tfperf_remeasured_by", {"trials": 12, "lock_trial": 14, "worker": {}})

    record = read_study(study)

    assert record.created_by_tfperf and record.pipeline == "pipeline.py"
    assert record.objective is Objective.THROUGHPUT_RAM
    assert record.references_enqueued
    assert record.guide == _stored_guide()
    assert record.discovery == discovery and record.code_root == str(tmp_path)
    assert record.remeasured == [MEASURED]
    assert record.remeasured_by == RemeasureCover(12, 14, {})
    remeasurement = stored_remeasurement(study)
    assert remeasurement is not None and remeasurement.measurements == [MEASURED]


def test_a_record_round_trips_and_a_partial_one_writes_only_its_fields(study, tmp_path):
    record = StudyRecord(
        pipeline="p.py",
        objective=Objective.THROUGHPUT,
        references_enqueued=True,
        guide={"limit": None},
        discovery=Discovery(sites=(SITE,)),
        code_root=str(tmp_path),
        remeasured=[MEASURED],
        remeasured_by=RemeasureCover(3, None, {"pid": 7}),
        source="ab" * 32,
    )
    write_study(study, record)
    assert read_study(study) == record
    write_study(study, StudyRecord(guide={"limit": 1}))
    assert read_study(study) == StudyRecord(**{**record.__dict__, "guide": {"limit": 1}})


def test_a_study_of_another_tool_reads_as_an_empty_record(study):
    study.set_user_attr("tfperf_objective", "fastest-please")  # not an objective tfperf knows
    study.set_user_attr("someone_else", 1)
    record = read_study(study)
    assert not record.created_by_tfperf
    assert record == StudyRecord()


def test_the_face_exports_no_raw_attribute_keys():
    assert not [name for name in tfperf.study.__all__ if name.endswith("_ATTR")]


def test_an_old_studys_guide_and_reference_trials_load_as_proposals(study):
    """A study the current release left mid-way: its guide with four estimate fields and the
    pooled estimate's trial done; a tuner of this tfperf picks both up."""
    from tfperf.tuner._references import References

    guide = _stored_guide()
    study.set_user_attr("tfperf_pipeline", "pipeline.py")
    study.set_user_attr("tfperf_guide", guide)
    for number, label in enumerate(("baseline", "estimate", "estimate-pool")):
        knobs = guide["pool_estimate" if label == "estimate-pool" else "estimate"]["knobs"]
        attrs = TrialRecord(knobs=Knobs.from_mapping(knobs), reference=label).to_user_attrs()
        study.add_trial(optuna.trial.create_trial(values=[100.0 + number], user_attrs=attrs))
    ledger = Ledger(study, Liveness(1, 2), {"host": "h", "pid": 1}, None, Objective.THROUGHPUT)
    machine = Machine(2, 8 << 30, 6 << 30, (), False)
    references = References(Knobs(batch_size=32), machine, {}, [])

    references.load(ledger)

    assert references.guide is not None
    assert [e.kind for e in references.guide.estimates] == [Reference.ESTIMATE, Reference.POOL]
    assert references.knobs["estimate-pool"].to_dict() == guide["pool_estimate"]["knobs"]
    [estimate, pooled] = references.estimates(study, {})
    assert (estimate.trial_number, estimate.measured_examples_per_sec) == (1, 101.0)
    assert (pooled.trial_number, pooled.measured_examples_per_sec) == (2, 102.0)


def test_a_study_begun_before_the_source_digest_reads_without_one_and_takes_the_first(study):
    from tfperf.study import SourceChangedError, claim_study

    study.set_user_attr("tfperf_pipeline", "pipeline.py")  # as the release before it wrote
    study.set_user_attr("tfperf_objective", "throughput")
    assert read_study(study).source is None
    claim_study(study, "pipeline.py", Objective.THROUGHPUT, "s.db", "aa" * 32)
    assert read_study(study).source == "aa" * 32
    claim_study(study, "pipeline.py", Objective.THROUGHPUT, "s.db", "aa" * 32)
    with pytest.raises(SourceChangedError, match="changed since its study began"):
        claim_study(study, "pipeline.py", Objective.THROUGHPUT, "s.db", "bb" * 32)


def test_the_emulated_step_is_stored_and_absent_for_a_real_one(study):
    write_study(study, StudyRecord(pipeline="pipeline.py", step_time_s=0.005))
    assert study.user_attrs["tfperf_step_time_s"] == 0.005
    assert read_study(study).step_time_s == 0.005
    assert "tfperf_step_time_s" not in StudyRecord(pipeline="p.py").to_attrs()
