"""Ready-to-paste code for a configuration."""

from __future__ import annotations

from tfperf.knobs import AUTOTUNE, Knobs
from tfperf.report._snippets import baseline_snippet, tf_data_snippet


def test_baseline_snippet_is_valid_python_that_round_trips():
    knobs = Knobs(
        batch_size=128, num_parallel_calls=AUTOTUNE, prefetch=2, mixed_precision="mixed_bfloat16"
    ).to_dict()
    namespace: dict = {}
    exec(baseline_snippet(knobs), namespace)
    assert Knobs.from_mapping(namespace["BASELINE"]).to_dict() == knobs
    assert "'num_parallel_calls': \"AUTOTUNE\"" in baseline_snippet(knobs)


def test_tf_data_snippet_carries_every_value():
    knobs = Knobs(
        batch_size=96,
        shuffle_buffer=4096,
        num_parallel_calls=8,
        prefetch=0,
        deterministic=False,
        mixed_precision="mixed_bfloat16",
    ).to_dict()
    text = tf_data_snippet(knobs)
    assert "ds.map(parse, num_parallel_calls=8)" in text
    assert "ds.batch(96)" in text and "ds.shuffle(4096)" in text
    assert "prefetch" not in text  # prefetch 0 means no prefetch call
    assert "options.deterministic = False" in text
    assert 'set_global_policy("mixed_bfloat16")' in text


def test_interleave_parallelism_never_exceeds_its_cycle_length():
    knobs = Knobs(cycle_length=2, num_parallel_reads=8).to_dict()
    assert "interleave(read, cycle_length=2, num_parallel_calls=2)" in tf_data_snippet(knobs)
