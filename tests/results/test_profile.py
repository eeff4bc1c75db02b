"""ProfileResult: JSON round trip, loading errors, the per-step DataFrame."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tests.fakes.clock import FakeClock, TimedData, timed_step
from tfperf.errors import ResultFileError
from tfperf.measure._profiler import profile
from tfperf.probes import HostProbe
from tfperf.results import ProfileResult, Verdict
from tfperf.results.stages import (
    AutotuneChoice,
    AutotuneReadout,
    BatchShape,
    DatasetOptions,
    EpochSource,
    RestartCost,
    StageKind,
    StageReport,
    StageStat,
    StageUnit,
)


@pytest.fixture(scope="module")
def result() -> ProfileResult:
    clock = FakeClock()
    return profile(
        TimedData(clock, [0.02] * 6, batch=4),
        timed_step(clock, 0.01),
        steps=4,
        warmup=1,
        clock=clock,
        probes=[HostProbe()],
        pipeline="demo.py",
        knobs={"batch_size": 4},
    )


def test_json_round_trip_is_lossless(result, tmp_path):
    path = result.save(tmp_path / "out" / "demo.json")
    loaded = ProfileResult.load(path)
    assert loaded == result
    assert loaded.verdict is Verdict.HIGHLY_INPUT_BOUND


def test_json_carries_the_documented_keys(result):
    data = json.loads(result.to_json())
    assert data["verdict"] == "highly-input-bound"
    for key in ("end_to_end", "pipeline_only", "compute_only"):
        assert data[key]["examples_per_sec"] > 0
    assert data["input_wait_fraction"] == pytest.approx(2 / 3)
    assert data["host_memory"]["peak_rss_bytes"] > 0
    assert isinstance(data["gpus"], list)
    assert "gpu_unavailable_reason" in data
    assert data["schema_version"] == 1


def test_to_frame_has_one_row_per_step(result):
    frame = result.to_frame()
    assert list(frame.columns) == [
        "phase",
        "step",
        "start_s",
        "wait_s",
        "compute_s",
        "step_s",
        "examples",
        "epoch",
        "warmup",
    ]
    e2e = frame[frame.phase == "end_to_end"]
    assert len(e2e) == 5
    assert e2e.warmup.tolist() == [True, False, False, False, False]
    assert e2e.wait_s.iloc[1:].tolist() == pytest.approx([0.02] * 4)
    assert set(frame.phase) == {"end_to_end", "pipeline_only", "compute_only"}


def test_load_missing_file(tmp_path):
    with pytest.raises(ResultFileError, match="cannot read result file"):
        ProfileResult.load(tmp_path / "nope.json")


def test_load_not_json(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    with pytest.raises(ResultFileError, match=r"bad\.json: result is not valid JSON"):
        ProfileResult.load(path)


def test_load_wrong_schema(tmp_path, result):
    data = result.to_dict()
    data["schema_version"] = 99
    path = tmp_path / "future.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ResultFileError, match="schema_version 99"):
        ProfileResult.load(path)


def test_load_corrupted_field(tmp_path, result):
    data = result.to_dict()
    data["verdict"] = "very-slow"
    path = tmp_path / "corrupt.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ResultFileError) as raised:
        ProfileResult.load(path)
    assert str(raised.value) == (
        f"{path}: result does not match the ProfileResult schema: verdict: Input should be "
        "'highly-input-bound', 'moderately-input-bound' or 'compute-bound' (got 'very-slow')"
    )


def test_load_names_every_field_at_fault_by_its_path(result):
    data = result.to_dict()
    del data["end_to_end"]["steps"]
    data["gpus"] = "none"
    with pytest.raises(ResultFileError) as raised:
        ProfileResult.from_dict(data)
    assert str(raised.value) == (
        "result does not match the ProfileResult schema: end_to_end.steps: missing; "
        "gpus: Input should be a valid list (got 'none')"
    )


def _with_stages(result):
    stage = StageStat(
        index=0,
        kind=StageKind.MAP,
        label="map(parse)",
        location="pipeline.py:12",
        parameters={"num_parallel_calls": -1, "deterministic": True},
        unit=StageUnit.EXAMPLE,
        elements_per_sec=2000.0,
        examples_per_sec=2000.0,
        cpu_s_per_element=0.0005,
        cpu_s_per_example=0.0005,
        added_s_per_example=0.0005,
        added_cpu_s_per_example=0.0005,
        elements=1000,
        duration_s=0.5,
    )
    report = StageReport(
        stages=[stage],
        bottleneck_index=0,
        falls_short_index=0,
        consumption_examples_per_sec=13_500.0,
        seconds_per_stage=0.5,
        warmup_s=0.2,
        duration_s=0.9,
        note=None,
        advice="The limiting stage is map(parse).",
    )
    choice = AutotuneChoice(
        0, "map(parse)", "ParallelMapV2", "parallelism", "num_parallel_calls", 2, True
    )
    return dataclasses.replace(result, stages=report, autotune=AutotuneReadout([choice]))


def test_stages_and_autotune_choices_round_trip(result, tmp_path):
    full = _with_stages(result)
    loaded = ProfileResult.load(full.save(tmp_path / "stages.json"))
    assert loaded == full
    assert loaded.stages is not None and loaded.stages.bottleneck is loaded.stages.stages[0]
    # A bool parameter stays a bool and AUTOTUNE (-1) an int through JSON.
    assert loaded.stages.stages[0].parameters == {"num_parallel_calls": -1, "deterministic": True}
    assert loaded.stages.stages[0].kind is StageKind.MAP


def test_a_result_saved_before_stages_existed_still_loads(result, tmp_path):
    data = _with_stages(result).to_dict()
    del data["stages"], data["autotune"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    loaded = ProfileResult.load(path)
    assert loaded.stages is None and loaded.autotune is None
    assert loaded == result


def test_restarts_batch_shapes_and_dataset_options_round_trip(result, tmp_path):
    rich = dataclasses.replace(
        result,
        restarts=RestartCost(
            restarts=1,
            seconds_per_restart=0.8,
            stage="shuffle(640)",
            stage_kind=StageKind.SHUFFLE,
            steady_wait_s_per_step=0.001,
            steady_wait_fraction=0.09,
            weighted_wait_fraction=0.1,
            window_wait_share=0.95,
            epoch_steps=40,
            epoch_source=EpochSource.CARDINALITY,
            weighted_examples_per_sec=300.0,
        ),
        batch_shapes=[
            BatchShape("(4, 3)", 6, 4, 0.01, 0.01),
            BatchShape("(2, 3)", 1, 2, 0.2, None),
        ],
        dataset_options=DatasetOptions(
            deterministic=False, private_threadpool_size=4, autotune=None
        ),
    )
    loaded = ProfileResult.load(rich.save(tmp_path / "rich.json"))
    assert loaded == rich
    assert loaded.restarts is not None and loaded.restarts.epoch_source is EpochSource.CARDINALITY


def test_a_file_written_before_restarts_were_recorded_still_loads(result):
    data = result.to_dict()
    for key in ("restarts", "batch_shapes", "dataset_options"):
        data.pop(key)
    loaded = ProfileResult.from_dict(data)
    assert (loaded.restarts, loaded.batch_shapes, loaded.dataset_options) == (None, [], None)


def test_batch_shape_retrace_is_the_first_steps_excess_over_its_typical_step() -> None:
    assert BatchShape("(32, 5)", 4, 32, 0.3, 0.004).retrace_s == pytest.approx(0.296)
    assert BatchShape("(32, 5)", 4, 32, 0.003, 0.004).retrace_s == 0.0  # no excess
    assert BatchShape("(32, 5)", 1, 32, 0.3, None).retrace_s == 0.0  # came once: unknown


def test_dataset_options_of_a_file_written_before_later_options_still_load(result):
    data = result.to_dict()
    data["dataset_options"] = {
        "deterministic": False,
        "private_threadpool_size": 4,
        "autotune": None,
    }
    loaded = ProfileResult.from_dict(data).dataset_options
    assert loaded == DatasetOptions(deterministic=False, private_threadpool_size=4)
    assert loaded.carried("private_threadpool_size") == 4 and loaded.carried("other") is None


def test_dataset_options_keep_an_option_without_a_field_of_its_own_by_knob_name(result):
    options = DatasetOptions.of({"deterministic": None, "later_option": 2}, autotune=True)
    assert options.others == {"later_option": 2} and options.carried("later_option") == 2
    saved = dataclasses.replace(result, dataset_options=options).to_dict()
    assert ProfileResult.from_dict(saved).dataset_options == options


def test_only_hazards_the_baseline_did_not_have_are_introduced():
    from tfperf.results.findings import Evidence, Finding, Level, introduced_hazards

    def finding(rule: str, hazard: bool) -> Finding:
        return Finding(rule, Level.NOTE, f"{rule} said.", "Do this.", Evidence(None, None),
                       hazard=hazard)  # fmt: skip

    shards, frozen = finding("worker-shards", True), finding("frozen-draws", True)
    plain = finding("restarts", False)
    assert introduced_hazards([plain, shards, frozen], [frozen]) == ["worker-shards said. Do this."]
    assert introduced_hazards([plain], []) == []
    assert introduced_hazards([shards], [shards]) == []
