"""The scaling curve as a record: inside the profile's JSON, read back validated."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tests.reports import fake_profile
from tfperf.errors import ResultFileError
from tfperf.results import ProfileResult
from tfperf.results.scaling import (
    BatchScaling,
    ReplicaDevice,
    ScalingCurve,
    ScalingFailure,
    ScalingPoint,
)


def a_curve() -> ScalingCurve:
    points = [
        ScalingPoint(1, 1, 32, 1000.0, 0.01, 1500.0, 3000.0, True),
        ScalingPoint(2, 2, 64, 1400.0, 0.30, 2800.0, 3000.0, False),
    ]
    return ScalingCurve(
        points=points,
        device=ReplicaDevice.CPU,
        batch=BatchScaling.PER_REPLICA_FIXED,
        per_replica_batch=32,
        strategy="mirrored",
        keeps_up_below=0.05,
        feeds_replicas=1,
        next_replicas=2,
        next_wait_fraction=0.30,
        failures=[ScalingFailure(4, "timeout: stopped after 60 s")],
    )


def test_the_curve_round_trips_inside_the_profile_json():
    result = dataclasses.replace(fake_profile(), scaling=a_curve())
    data = json.loads(result.to_json())
    assert data["scaling"]["device"] == "cpu"
    assert data["scaling"]["batch"] == "per-replica-fixed"
    assert data["scaling"]["points"][1]["input_wait_fraction"] == 0.30
    loaded = ProfileResult.from_json(result.to_json())
    assert loaded.scaling == a_curve()
    assert loaded.scaling.point(2).per_replica_examples_per_sec == 700.0
    assert loaded.scaling.point(2).per_replica_batch == 32.0
    assert loaded.scaling.point(8) is None


def test_a_profile_without_the_curve_loads_with_none():
    data = json.loads(fake_profile().to_json())
    data.pop("scaling", None)
    assert ProfileResult.from_dict(data).scaling is None


def test_a_bad_field_is_named_by_its_path():
    data = json.loads(dataclasses.replace(fake_profile(), scaling=a_curve()).to_json())
    data["scaling"]["points"][0]["replicas"] = "two"
    with pytest.raises(ResultFileError, match=r"scaling\.points\[0\]\.replicas"):
        ProfileResult.from_dict(data)


def test_distributed_only_when_every_step_ran_across_its_replicas():
    curve = a_curve()
    assert curve.distributed
    curve.points[1].replicas_in_step = 1
    assert not curve.distributed
