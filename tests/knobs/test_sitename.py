"""The grammar of call-site knob names: `SiteName` prints and parses them, one way each."""

from __future__ import annotations

import pytest

from tfperf.errors import KnobError
from tfperf.knobs import SiteKind, SiteName, training_sites


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("map@pipeline.py:23.num_parallel_calls", ("map", "pipeline.py", 23, None)),
        ("map@pipeline.py:23#2.num_parallel_calls", ("map", "pipeline.py", 23, 2)),
        ("batch@data/input.py:7.batch_size", ("batch", "data/input.py", 7, None)),
        ("shuffle@data/deep/input.py:41#1.buffer_size", ("shuffle", "data/deep/input.py", 41, 1)),
        ("TFRecordDataset@read.py:3.num_parallel_reads", ("TFRecordDataset", "read.py", 3, None)),
    ],
)
def test_a_name_parses_into_its_parts_and_prints_back_unchanged(text, parts):
    name = SiteName.parse(text)
    assert (name.method, name.file, name.line, name.nth) == parts
    assert str(name) == text
    assert SiteName.parse(str(name)) == name


def test_printing_builds_the_canonical_name_from_parts():
    assert str(SiteName("map", "pipeline.py", 23, None, "num_parallel_calls")) == (
        "map@pipeline.py:23.num_parallel_calls"
    )
    assert str(SiteName("batch", "data/input.py", 7, 2, "batch_size")) == (
        "batch@data/input.py:7#2.batch_size"
    )


@pytest.mark.parametrize(
    "text",
    ["batch_size", "map@pipeline.py.num_parallel_calls", "map@pipeline.py:x.num_parallel_calls"],
)
def test_a_malformed_name_is_refused_with_the_grammar(text):
    with pytest.raises(KnobError, match=r"is not a call-site name; they read METHOD@FILE:LINE"):
        SiteName.parse(text)


def test_an_argument_tfperf_does_not_tune_is_refused_by_name():
    with pytest.raises(KnobError, match=r"map@p.py:3.deterministic: tfperf does not tune"):
        SiteName.parse("map@p.py:3.deterministic")


def test_the_kind_says_what_the_argument_controls():
    assert SiteName.parse("map@p.py:3#2.num_parallel_calls").kind is SiteKind.PARALLELISM
    assert SiteName.parse("batch@sub/p.py:4.batch_size").kind is SiteKind.BATCH


def test_training_sites_are_batch_sizes_and_shuffle_buffers_that_changed():
    before = {
        "batch@p.py:4.batch_size": 32,
        "shuffle@p.py:5.buffer_size": 100,
        "map@p.py:3.num_parallel_calls": 1,
    }
    after = {**before, "batch@p.py:4.batch_size": 64, "map@p.py:3.num_parallel_calls": 8}
    assert training_sites(before, after) == ["batch@p.py:4.batch_size"]
