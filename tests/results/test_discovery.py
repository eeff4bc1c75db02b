"""Records read back from JSON: `Discovery`/`CallSite` round trips, and `validated`'s messages."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tfperf.errors import ResultFileError, TfperfError
from tfperf.results import validated
from tfperf.results.discovery import ArgumentForm, CallSite, Discovery, SlowStage, Untunable

SITE = CallSite(
    name="map_parse",
    file="pipeline.py",
    line=12,
    col=4,
    end_line=13,
    end_col=40,
    method="map",
    argument="num_parallel_calls",
    form=ArgumentForm.KEYWORD,
    index=None,
    value=4,
    calls=2,
)
DISCOVERY = Discovery(
    sites=(SITE, dataclasses.replace(SITE, name="batch", form=ArgumentForm.ABSENT, value=None)),
    untunable=(Untunable("interleave", "lib/x.py:3", "pipeline.py:20", "a library's call"),),
    slowest=SlowStage("map(parse)", "pipeline.py:5", 0.002, ("map_parse",)),
)


def test_discovery_round_trips_through_json():
    text = json.dumps(DISCOVERY.to_dict())
    assert Discovery.from_dict(json.loads(text)) == DISCOVERY


def test_discovery_dict_is_plain_json_with_enum_values():
    data = DISCOVERY.to_dict()
    assert data["sites"][0]["form"] == "keyword"
    assert data["slowest"]["sites"] == ["map_parse"]
    assert "kind" not in data["sites"][0] and "where" not in data["sites"][0]


def test_discovery_ignores_keys_a_reader_added():
    # A study stores the code's root beside the discovery (see tfperf.tuner).
    assert Discovery.from_dict({"root": "/code", **DISCOVERY.to_dict()}) == DISCOVERY


def test_empty_discovery_loads_from_an_empty_object():
    assert Discovery.from_dict({}) == Discovery()


def test_call_site_round_trips_alone():
    assert CallSite.from_dict(SITE.to_dict()) == SITE


def test_bad_discovery_names_each_field_at_fault():
    data = DISCOVERY.to_dict()
    data["sites"][1]["form"] = "kw"
    del data["sites"][0]["line"]
    data["slowest"]["sites"] = "map_parse"
    with pytest.raises(ResultFileError) as raised:
        Discovery.from_dict(data)
    assert str(raised.value) == (
        "result does not match the Discovery schema: sites[0].line: missing; "
        "sites[1].form: Input should be 'keyword', 'positional' or 'absent' (got 'kw'); "
        "slowest.sites: Input should be a valid tuple (got 'map_parse')"
    )


@dataclasses.dataclass(frozen=True)
class Pair:
    count: int
    names: tuple[str, ...] = ()


class PairError(TfperfError):
    pass


def test_validated_converts_in_lax_mode_and_not_in_strict_mode():
    assert validated(Pair, {"count": "3", "names": ["a"]}) == Pair(3, ("a",))
    with pytest.raises(PairError) as raised:
        validated(Pair, {"count": "3"}, source="pair.json", error=PairError, strict=True)
    assert str(raised.value) == (
        "pair.json does not match the Pair schema: count: Input should be a valid integer (got '3')"
    )
    assert validated(Pair, {"count": 3, "names": ["a"]}, strict=True) == Pair(3, ("a",))


def test_validated_shortens_long_values_and_counts_extra_errors():
    with pytest.raises(ResultFileError) as raised:
        validated(Pair, {"count": "x" * 100})
    assert str(raised.value) == (
        "result does not match the Pair schema: count: Input should be a valid integer, unable "
        f"to parse string as an integer (got '{'x' * 56}...)"
    )
    with pytest.raises(ResultFileError, match=r"names\[4\]: .*; and 2 more$"):
        validated(Pair, {"count": 1, "names": list(range(7))})


def test_validated_in_strict_mode_refuses_what_json_cannot_hold():
    with pytest.raises(ResultFileError) as raised:
        validated(Pair, {"count": 1, "names": {"a"}}, strict=True)
    assert str(raised.value) == (
        "result is not JSON data (Object of type set is not JSON serializable): "
        "{'count': 1, 'names': {'a'}}"
    )


def test_arrays_given_to_fit_are_told_how_to_become_tunable():
    from tfperf.results.discovery import describe_discovery

    (line,) = describe_discovery(Discovery(end="train.py:7", fit_gets_arrays=True))
    assert line.startswith("No tunable tf.data call was found in your files: `fit` at train.py:7")
    assert "tf.data.Dataset.from_tensor_slices" in line
    assert describe_discovery(Discovery()) == ["No tunable tf.data call was found in your files."]
