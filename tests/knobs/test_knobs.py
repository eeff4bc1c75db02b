"""Knobs: closed, typed, frozen; AUTOTUNE by name or number."""

from __future__ import annotations

import dataclasses

import pytest

from tfperf.errors import KnobError
from tfperf.knobs import AUTOTUNE, Knobs, Precision, check_value, format_value


def test_defaults_are_documented_values():
    knobs = Knobs()
    assert knobs.batch_size == 32
    assert knobs.num_parallel_calls == AUTOTUNE
    assert knobs.mixed_precision is Precision.FLOAT32
    assert knobs.deterministic is None


def test_matches_tf_data_autotune():
    tf = pytest.importorskip("tensorflow")
    assert AUTOTUNE == tf.data.AUTOTUNE


def test_from_mapping_overrides_and_normalises():
    knobs = Knobs.from_mapping(
        {"batch_size": 64, "num_parallel_calls": "AUTOTUNE", "mixed_precision": "mixed_bfloat16"}
    )
    assert knobs.batch_size == 64
    assert knobs.num_parallel_calls == AUTOTUNE
    assert knobs.mixed_precision is Precision.MIXED_BFLOAT16


def test_unknown_name_lists_valid_names():
    with pytest.raises(KnobError) as caught:
        Knobs.from_mapping({"batchsize": 64}, source="pipeline.py: BASELINE")
    message = str(caught.value)
    assert message.startswith("pipeline.py: BASELINE: unknown knob name 'batchsize'")
    assert "Valid names: batch_size, shuffle_buffer, num_parallel_calls" in message


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("batch_size", 0, "an integer >= 1"),
        ("batch_size", True, "an integer >= 1"),
        ("batch_size", "64", "an integer >= 1"),
        ("num_parallel_calls", 0, "an integer >= 1, AUTOTUNE or None"),
        ("num_parallel_calls", -2, "an integer >= 1, AUTOTUNE or None"),
        ("prefetch", -5, "an integer >= 0 or AUTOTUNE"),
        ("mixed_precision", "float16", "one of 'float32', 'mixed_float16', 'mixed_bfloat16'"),
        ("deterministic", "yes", "true, false or None"),
    ],
)
def test_bad_values_name_the_knob_and_the_rule(name, value, expected):
    with pytest.raises(KnobError, match=expected) as caught:
        Knobs.from_mapping({name: value})
    assert f"knob {name!r}" in str(caught.value)
    assert repr(value) in str(caught.value)


def test_prefetch_zero_means_off():
    assert Knobs(prefetch=0).prefetch == 0


def test_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Knobs().batch_size = 3  # type: ignore[misc]


def test_replace_checks_names_and_values():
    knobs = Knobs().replace(batch_size=128)
    assert knobs.batch_size == 128
    with pytest.raises(KnobError, match="unknown knob name 'bs'"):
        Knobs().replace(bs=1)
    with pytest.raises(KnobError, match="batch_size"):
        Knobs().replace(batch_size=-1)


def test_to_dict_and_diff_are_plain():
    a, b = Knobs(), Knobs(batch_size=64, mixed_precision="mixed_float16")
    assert a.to_dict()["mixed_precision"] == "float32"
    assert a.diff(b) == {"batch_size": (32, 64), "mixed_precision": ("float32", "mixed_float16")}
    assert Knobs.from_mapping(b.to_dict()) == b


def test_check_value_and_format_value():
    assert check_value("cycle_length", "autotune") == AUTOTUNE
    assert format_value(AUTOTUNE) == "AUTOTUNE"
    assert format_value(Precision.MIXED_FLOAT16) == "mixed_float16"
    assert format_value(True) == "True"


def test_site_values_travel_inside_knobs():
    name = "map@pipeline.py:23.num_parallel_calls"
    knobs = Knobs().replace(**{name: "AUTOTUNE"})
    assert knobs.sites == {name: AUTOTUNE}
    assert knobs.to_dict()["sites"] == {name: AUTOTUNE}
    assert "sites" not in Knobs().to_dict()  # files that read knobs store what they did
    assert Knobs.from_mapping(knobs.to_dict()) == knobs
    assert hash(knobs) == hash(Knobs.from_mapping({name: -1}))
    assert knobs.diff(Knobs()) == {name: (AUTOTUNE, None)}
    assert "sites" not in Knobs.names()


def test_site_values_are_checked_by_what_the_argument_controls():
    assert check_value("batch@pipeline.py:7.batch_size", 64) == 64
    with pytest.raises(
        KnobError,
        match=r"site 'batch@pipeline.py:7.batch_size' must be an "
        r"integer >= 1, but got -1",
    ):
        Knobs().replace(**{"batch@pipeline.py:7.batch_size": -1})
    with pytest.raises(KnobError, match=r"tfperf does not tune `batch\(drop_remainder=...\)`"):
        check_value("batch@pipeline.py:7.drop_remainder", 1)
    with pytest.raises(KnobError, match="is not a call-site name"):
        check_value("batch@pipeline.py.batch_size", 1)


@pytest.mark.parametrize("name", ["num_parallel_calls", "cycle_length", "num_parallel_reads"])
def test_none_is_accepted_where_tf_data_accepts_it(name):
    knobs = Knobs.from_mapping({name: None}, source="BASELINE")
    assert getattr(knobs, name) is None
    assert Knobs.from_mapping(knobs.to_dict()) == knobs


@pytest.mark.parametrize("name", ["batch_size", "shuffle_buffer", "prefetch"])
def test_none_is_refused_where_tf_data_needs_a_value(name):
    with pytest.raises(KnobError, match=f"knob '{name}' must be an integer"):
        Knobs.from_mapping({name: None})


@pytest.mark.tf
def test_tf_data_takes_none_for_each_knob_that_accepts_it(tmp_path):
    import tensorflow as tf

    path = str(tmp_path / "data.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(b"x")
    none = Knobs(num_parallel_calls=None, cycle_length=None, num_parallel_reads=None)
    ds = tf.data.TFRecordDataset([path], num_parallel_reads=none.num_parallel_reads)
    ds = ds.map(tf.strings.length, num_parallel_calls=none.num_parallel_calls)
    ds = tf.data.Dataset.range(2).interleave(
        lambda _: ds, cycle_length=none.cycle_length, num_parallel_calls=none.num_parallel_calls
    )
    assert [int(x) for x in ds] == [1, 1]
