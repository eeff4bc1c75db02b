"""Parsing and validating a pipeline file's SEARCH_SPACE."""

from __future__ import annotations

import json
import os

import pytest

from tfperf.errors import KnobError
from tfperf.knobs import AUTOTUNE, Choices, Fixed, IntRange, Precision, parse_search_space
from tfperf.knobs._space import from_jsonable, to_jsonable

SOURCE = "pipeline.py: SEARCH_SPACE"


def parse(raw):
    return parse_search_space(raw, source=SOURCE)


def parse_error(raw) -> str:
    with pytest.raises(KnobError) as caught:
        parse(raw)
    message = str(caught.value)
    assert message.startswith(SOURCE), message
    return message


def test_lists_become_choices_in_order():
    assert parse({"batch_size": [32, 64, 128]}) == {"batch_size": Choices((32, 64, 128))}
    assert parse({"batch_size": (128, 32)}) == {"batch_size": Choices((128, 32))}


def test_choices_are_normalised_and_deduplicated_keeping_order():
    space = parse({"num_parallel_calls": ["AUTOTUNE", 4, -1, 2, 4, "autotune"]})
    assert space == {"num_parallel_calls": Choices((AUTOTUNE, 4, 2))}


def test_precision_and_tri_state_choices():
    space = parse({"mixed_precision": ["float32", "mixed_float16"], "deterministic": [None, False]})
    assert space["mixed_precision"] == Choices((Precision.FLOAT32, Precision.MIXED_FLOAT16))
    assert space["deterministic"] == Choices((None, False))


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ([64], Fixed(64)),
        ([64, 64], Fixed(64)),
        (["AUTOTUNE", -1], Fixed(AUTOTUNE)),
        (64, Fixed(64)),
        ("AUTOTUNE", Fixed(AUTOTUNE)),
        ({"low": 8, "high": 8}, Fixed(8)),
    ],
)
def test_single_values_become_fixed(raw, expected):
    assert parse({"prefetch": raw}) == {"prefetch": expected}


def test_dicts_become_int_ranges():
    space = parse(
        {
            "prefetch": {"low": 0, "high": 8},
            "batch_size": {"low": 16, "high": 512, "log": True},
            "private_threadpool_size": {"low": 1, "high": 16},
        }
    )
    assert space == {
        "prefetch": IntRange(0, 8),
        "batch_size": IntRange(16, 512, log=True),
        "private_threadpool_size": IntRange(1, 16),
    }


def test_empty_space():
    assert parse({}) == {}


def test_unknown_name_lists_valid_names():
    message = parse_error({"batch": [32], "prefetch": [1]})
    assert "unknown knob name 'batch'" in message
    assert "Valid names: batch_size, shuffle_buffer, num_parallel_calls" in message


def test_bad_value_in_list_names_knob_value_and_list():
    message = parse_error({"batch_size": [32, 0]})
    assert message == (
        f"{SOURCE}: knob 'batch_size' must be an integer >= 1, but got 0 (in the list [32, 0])."
    )


def test_bad_fixed_value():
    message = parse_error({"mixed_precision": "fp16"})
    assert "'mixed_precision'" in message
    assert "'fp16'" in message
    assert "mixed_float16" in message


def test_empty_list_suggests_a_value_or_leaving_it_out():
    message = parse_error({"batch_size": []})
    assert "'batch_size' has an empty list of choices" in message
    assert "'batch_size': [32]" in message
    assert "leave 'batch_size' out" in message


def test_range_low_above_high_states_the_invariant():
    message = parse_error({"prefetch": {"low": 3, "high": 1}})
    assert "`low <= high` must hold, but got (low=3, high=1)" in message
    assert "'prefetch'" in message


def test_log_range_must_start_at_one():
    message = parse_error({"prefetch": {"low": 0, "high": 8, "log": True}})
    assert "`low >= 1` must hold when log is true, but got (low=0)" in message


def test_log_must_be_a_bool():
    assert "`log` must be true or false, but got 'yes'" in parse_error(
        {"prefetch": {"low": 1, "high": 8, "log": "yes"}}
    )


@pytest.mark.parametrize("knob", ["deterministic", "mixed_precision"])
def test_range_only_for_integer_knobs(knob):
    message = parse_error({knob: {"low": 0, "high": 1}})
    assert "ranges work for integer knobs only" in message
    assert "batch_size" in message
    assert "List the values to try instead" in message


def test_range_for_precision_suggests_listing_policies():
    assert "'mixed_precision': ['float32', 'mixed_float16']" in parse_error(
        {"mixed_precision": {"low": 0, "high": 1}}
    )


@pytest.mark.parametrize("bound", ["AUTOTUNE", -1])
def test_range_bounds_cannot_be_autotune(bound):
    message = parse_error({"num_parallel_calls": {"low": bound, "high": 8}})
    assert f"range bound low={bound!r} is not a number" in message
    assert "list the values instead" in message


def test_range_bound_none_is_not_a_number():
    message = parse_error({"private_threadpool_size": {"low": None, "high": 8}})
    assert "range bound low=None is not a number" in message


def test_range_bounds_are_validated_for_the_knob():
    message = parse_error({"batch_size": {"low": 0, "high": 8}})
    assert "knob 'batch_size' must be an integer >= 1, but got 0 (range bound 'low')" in message


def test_range_with_unknown_or_missing_keys():
    assert "has unknown key 'lo'" in parse_error({"batch_size": {"lo": 1, "high": 8}})
    assert "lacks 'high'" in parse_error({"batch_size": {"low": 1}})
    assert '{"low": 1, "high": 8}' in parse_error({"batch_size": {}})


def test_set_suggests_a_list():
    message = parse_error({"batch_size": {64, 32}})
    assert "'batch_size' is a set" in message
    assert "'batch_size': [32, 64]" in message


def test_range_object_suggests_a_list_or_range_dict():
    message = parse_error({"prefetch": range(1, 12, 5)})
    assert (
        "is a range (range(1, 12, 5)); write the choices as a list, e.g. 'prefetch': [1, 6, 11]"
        in message
    )
    assert '{"low": 1, "high": 8}' in message


def test_not_a_mapping():
    with pytest.raises(KnobError, match=r"SEARCH_SPACE must be a dict .* but it is a list"):
        parse_search_space([("batch_size", [32])], source=SOURCE)


def test_to_jsonable_is_plain_json():
    space = parse(
        {
            "batch_size": [32, 64],
            "mixed_precision": ["float32", "mixed_bfloat16"],
            "prefetch": {"low": 1, "high": 16, "log": True},
            "num_parallel_calls": "AUTOTUNE",
        }
    )
    data = to_jsonable(space)
    assert data == {
        "batch_size": {"type": "choices", "values": [32, 64]},
        "mixed_precision": {"type": "choices", "values": ["float32", "mixed_bfloat16"]},
        "prefetch": {"type": "int_range", "low": 1, "high": 16, "log": True},
        "num_parallel_calls": {"type": "fixed", "value": -1},
    }
    assert from_jsonable(json.loads(json.dumps(data))) == space


def test_from_jsonable_rejects_unknown_entries():
    with pytest.raises(KnobError, match=r"saved search space: entry 'prefetch' is .*tfperf"):
        from_jsonable({"prefetch": {"type": "grid"}})
    with pytest.raises(KnobError, match="unknown knob name 'batch'"):
        from_jsonable({"batch": {"type": "fixed", "value": 1}})


def _interleave_knobs(cycle, parallel):
    from tfperf.knobs import Knobs

    site = "interleave@p.py:9"
    return Knobs(sites={f"{site}.cycle_length": cycle, f"{site}.num_parallel_calls": parallel})


@pytest.mark.parametrize(
    ("cycle", "parallel", "refused"),
    [
        (2, 4, True),
        (2, 2, False),
        (2, AUTOTUNE, False),
        (AUTOTUNE, "cores + 1", True),
        (4, 1, False),
    ],
)
def test_cycle_conflicts_match_what_tf_data_refuses(cycle, parallel, refused):
    """The rule agrees with tf.data itself on a real interleave, built and iterated."""
    from tfperf.knobs import cycle_conflicts

    tf = pytest.importorskip("tensorflow")
    cores = len(os.sched_getaffinity(0))
    parallel = cores + 1 if parallel == "cores + 1" else parallel
    knobs = _interleave_knobs(cycle, parallel)
    try:
        dataset = tf.data.Dataset.range(4).interleave(
            lambda x: tf.data.Dataset.range(x), cycle_length=cycle, num_parallel_calls=parallel
        )
        list(dataset.take(2))
        tf_refused = False
    except (ValueError, tf.errors.InvalidArgumentError):
        tf_refused = True

    assert tf_refused is refused
    # A cycle_length of AUTOTUNE becomes the core count when the iterator is made.
    assert bool(cycle_conflicts(knobs, cores=cores)) is refused


def test_cycle_conflicts_on_knobs_only_where_an_interleave_takes_both():
    from tfperf.knobs import Knobs, cycle_conflicts

    knobs = Knobs(cycle_length=2, num_parallel_calls=8)
    assert cycle_conflicts(knobs) == []
    assert cycle_conflicts(knobs, knob_interleave=True) == ["num_parallel_calls=8 > cycle_length=2"]
