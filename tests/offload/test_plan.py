"""The offload rules, the record's round trip and its rendering: exact, no TensorFlow."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tfperf.errors import ResultFileError
from tfperf.offload import (
    Binding,
    CoreRate,
    OffloadResult,
    OffloadSettings,
    ServiceCeiling,
    VerifyPoint,
    binding,
    cores_per_worker,
    fit_workers,
    network_ceiling,
    workers_needed,
)
from tfperf.report import render_offload_html, render_offload_text
from tfperf.report._offload import offload_answer, offload_chart, offload_figure


def _result(**changes: object) -> OffloadResult:
    result = OffloadResult(
        pipeline="/data/heavy.py",
        cut="batch(16)",
        batch_examples=16,
        model_examples_per_sec=10_000.0,
        host_cores=2,
        core_rates=(CoreRate(1, 3000.0, 187.5), CoreRate(2, 5800.0, 362.5)),
        bytes_per_batch_raw=786_560,
        bytes_per_batch_compressed=400_000,
        ceilings=(ServiceCeiling("AUTO", 12_000.0, 750.0), ServiceCeiling("NONE", 14_000.0, 875.0)),
        verify=(VerifyPoint(1, 1, 2800.0), VerifyPoint(2, 1, 5040.0)),
        cores_per_worker=1,
        predicted_per_worker_examples_per_sec=3000.0,
        per_worker_examples_per_sec=2800.0,
        efficiency=0.9,
        workers_needed=4,
        trainer_ceiling_examples_per_sec=12_000.0,
        network_gbps=None,
        network_ceiling_examples_per_sec=None,
        binds=Binding.WORKERS,
        compression="AUTO",
    )
    return dataclasses.replace(result, **changes)  # type: ignore[arg-type]


def test_cores_per_worker_takes_the_cheapest_count_near_the_best_rate_per_core() -> None:
    rates = [CoreRate(1, 1000.0, 1.0), CoreRate(2, 1950.0, 1.0), CoreRate(4, 2400.0, 1.0)]
    assert cores_per_worker(rates).cores == 1
    assert cores_per_worker([CoreRate(1, 100.0, 1.0), CoreRate(2, 400.0, 1.0)]).cores == 2
    with pytest.raises(ValueError, match="at least one"):
        cores_per_worker([])


def test_the_fit_takes_one_worker_as_the_rate_and_the_slope_for_efficiency() -> None:
    assert fit_workers([VerifyPoint(1, 1, 100.0), VerifyPoint(2, 1, 180.0)]) == (100.0, 0.92)
    assert fit_workers([VerifyPoint(1, 2, 50.0)]) == (50.0, 1.0)
    assert fit_workers([VerifyPoint(2, 1, 180.0)]) is None


def test_workers_needed_rounds_up_and_is_at_least_one() -> None:
    assert workers_needed(10_000.0, 2800.0, 0.9) == 4
    assert workers_needed(10.0, 2800.0, 0.9) == 1
    with pytest.raises(ValueError, match="per_worker > 0"):
        workers_needed(1.0, 0.0, 1.0)


def test_binding_names_the_trainer_then_the_network_then_the_workers() -> None:
    assert binding(10_000.0, 4, trainer_ceiling=8000.0, network=None) is Binding.TRAINER
    assert binding(10_000.0, 4, trainer_ceiling=None, network=9000.0) is Binding.NETWORK
    assert binding(10_000.0, 4, trainer_ceiling=20_000.0, network=None) is Binding.WORKERS
    assert binding(100.0, 1, trainer_ceiling=20_000.0, network=None) is Binding.MODEL
    # 1 Gbit/s is 125 MB/s: 125 batches of 1 MB, 16 examples each.
    assert network_ceiling(1.0, 1_000_000, 16) == pytest.approx(2000.0)


def test_settings_refuse_what_cannot_be_measured() -> None:
    with pytest.raises(ValueError, match="seconds > 0"):
        OffloadSettings(seconds=0)
    with pytest.raises(ValueError, match="'AUTO' or 'NONE'"):
        OffloadSettings(compression="ZSTD")


def test_the_result_round_trips_through_json(tmp_path: Path) -> None:
    result = _result()
    assert OffloadResult.load(result.save(tmp_path / "o.json")) == result
    data = result.to_dict()
    for key in ("workers_needed", "cores_per_worker", "per_worker_examples_per_sec", "binds"):
        assert key in data
    with pytest.raises(ResultFileError, match="newer"):
        OffloadResult.from_dict({**data, "format": 99})
    with pytest.raises(ResultFileError, match="not an offload result"):
        OffloadResult.from_dict({"pipeline": "x"})


def test_the_answer_names_workers_cores_and_what_binds() -> None:
    assert offload_answer(_result()).startswith(
        "4 tf.data service worker(s) of 1 core(s) feed the model at 10,000 examples/s. "
        "What binds: the workers: each one adds about 2,520 examples/s."
    )
    trainer = offload_answer(_result(binds=Binding.TRAINER))
    assert "tops out at 12,000 examples/s" in trainer
    stopped = offload_answer(_result(workers_needed=None, binds=None, fault="worker died"))
    assert (
        stopped == "No answer: the verify through the local service did not finish (worker died)."
    )


def test_the_chart_data_and_figure() -> None:
    data = offload_chart(_result())
    assert data.workers == (1, 2)
    assert data.measured == (2800.0, 5040.0)
    assert data.fitted == pytest.approx((2800.0, 5040.0, 7560.0, 10080.0))
    assert data.predicted == (3000.0, 6000.0, 9000.0, 12000.0)
    names = [trace.name for trace in offload_figure(data).data]
    assert names == [
        "predicted (pinned cores)",
        "fitted (per worker x η)",
        "measured through the local service",
        "model consumes",
        "trainer ceiling",
    ]


def test_text_and_html_render_a_saved_result() -> None:
    text = render_offload_text(_result(fault="the worker died"))
    assert "workers needed                 4" in text
    assert "Stopped early: the worker died" in text
    html = render_offload_html(_result())
    assert "How many tf.data service workers" in html and "batch(16)" in html


def test_tfperf_report_redraws_a_saved_offload_result(tmp_path: Path) -> None:
    from tfperf.cli.main import main

    saved = _result().save(tmp_path / "heavy-offload.json")
    assert main(["report", str(saved), "--html", str(tmp_path / "again.html")]) == 0
    assert "How many tf.data service workers" in (tmp_path / "again.html").read_text()
