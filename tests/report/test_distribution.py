"""The replicas section of a distributed profile: rows, terminal text, HTML, JSON."""

from __future__ import annotations

from tests.reports import fake_profile
from tfperf.report import render_profile_html, render_summary
from tfperf.report._distribution import distribution_rows, distribution_text
from tfperf.results import ProfileResult
from tfperf.results.scaling import DistributedInput, Distribution

DEVICES = [
    "/job:localhost/replica:0/task:0/device:CPU:0",
    "/job:localhost/replica:0/task:0/device:CPU:1",
]


def distributed_profile() -> ProfileResult:
    result = fake_profile()
    result.distribution = Distribution(
        strategy="MirroredStrategy",
        replicas=2,
        devices=DEVICES,
        input=DistributedInput.FROM_FUNCTION,
        global_batch=64,
        per_replica_batch=32.0,
        examples_per_sec=5000.0,
        examples_per_sec_per_replica=2500.0,
    )
    return result


def test_the_rows_name_strategy_devices_batches_and_rates() -> None:
    rows = distribution_rows(distributed_profile().distribution)  # type: ignore[arg-type]

    assert dict(rows) == {
        "strategy": "MirroredStrategy, 2 replicas",
        "devices": "CPU:0, CPU:1",
        "input": "strategy.distribute_datasets_from_function: make_dataset(knobs, "
        "input_context) batches per replica",
        "global batch": "64",
        "per-replica batch": "32",
        "examples/s, all replicas": "5,000.0",
        "examples/s, per replica": "2,500.0",
    }


def test_terminal_html_and_json_carry_the_per_replica_figures() -> None:
    result = distributed_profile()

    assert "  per-replica batch         32" in render_summary(result)
    html = render_profile_html(result)
    assert "<h2>Replicas</h2>" in html
    assert "<tr><th>examples/s, per replica</th><td>2,500.0</td></tr>" in html
    loaded = ProfileResult.from_json(result.to_json())
    assert loaded.distribution == result.distribution
    assert loaded.distribution is not None
    assert loaded.distribution.input is DistributedInput.FROM_FUNCTION


def test_a_profile_without_a_strategy_shows_no_replicas() -> None:
    result = fake_profile()

    assert distribution_text(result) == ""
    assert "<h2>Replicas</h2>" not in render_profile_html(result)
    assert ProfileResult.from_json(result.to_json()).distribution is None
