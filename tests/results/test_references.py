"""Reference kinds, the one table of words reports name them by, and results stored before
the model's proposals were a list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tfperf.errors import ResultFileError
from tfperf.knobs import Knobs
from tfperf.results import plain_dict, validated
from tfperf.results._references import REFERENCE_WORDS, reference_name
from tfperf.results._tune import recommend
from tfperf.results.tune import Estimate, Reference, TuneResult, folded_estimates

STORED = Path(__file__).parent.parent / "stored"


def test_every_kind_has_words_and_every_proposal_a_summary_and_headline():
    assert set(REFERENCE_WORDS) == set(Reference)
    for kind in Reference:
        assert kind.words.name
        if kind.proposed:
            assert kind.words.summary and kind.words.headline


def test_a_kind_is_its_stored_label():
    assert Reference("estimate-pool") is Reference.POOL
    assert Reference.TRAINING == "estimate-training"
    assert {Reference.BASELINE.value: 1}[Reference.BASELINE] == 1
    labels = ("baseline", "autotune", "estimate", "trial 4")
    assert [Reference.is_proposal(label) for label in labels] == [False, False, True, False]


def test_the_recommendation_names_a_reference_by_its_words():
    assert reference_name("estimate-runner-up") == (
        "tfperf's estimate under the runner-up training setting"
    )
    assert reference_name("trial 12") is None


def test_the_words_are_filled_from_the_estimate_they_name():
    knobs = {"batch_size": 64, "mixed_precision": "mixed_bfloat16", "private_threadpool_size": 1}
    runner = Estimate(knobs, 10.0, changes_training=["batch_size", "mixed_precision"])
    assert Reference.RUNNER_UP.words.summary_for(runner) == (
        "its estimate under the runner-up setting (batch_size=64, mixed_precision=mixed_bfloat16)"
    )
    assert Reference.TRAINING.words.headline_for(runner) == (
        "Its estimate with batch_size, mixed_precision changed"
    )
    assert Reference.POOL.words.headline_for(runner) == (
        "The same with its input on a pool of 1 core"
    )


def test_a_tune_json_with_the_four_estimate_fields_still_loads():
    """A result saved by the release that kept the estimate, training estimate, pooled estimate
    and runner-up in four fields of their own reads as the list, each with its kind."""
    stored = json.loads((STORED / "tune-result-four-estimate-fields.json").read_text())
    assert "estimates" not in stored and stored["runner_up_estimate"] is None

    result = TuneResult.from_dict(stored)

    assert [e.kind for e in result.estimates] == [
        Reference.ESTIMATE,
        Reference.TRAINING,
        Reference.POOL,
    ]
    for kind, field in [
        (Reference.ESTIMATE, "estimate"),
        (Reference.TRAINING, "training_estimate"),
        (Reference.POOL, "pool_estimate"),
    ]:
        found = result.estimate_of(kind)
        assert found is not None
        # A stored estimate may hold only the knobs it set: the rest read as their defaults.
        assert found.knobs == Knobs.from_mapping(stored[field]["knobs"])
        assert found.trial_number == stored[field]["trial_number"]
        assert found.changes_training == stored[field]["changes_training"]
    assert result.estimate_of(Reference.RUNNER_UP) is None
    saved = result.to_dict()
    assert "training_estimate" not in saved
    assert TuneResult.from_dict(json.loads(json.dumps(saved))) == result


def test_folding_leaves_a_record_that_has_the_list_as_it_is():
    data = {"estimates": [], "estimate": {"knobs": {}, "predicted_examples_per_sec": 1.0}}
    assert folded_estimates(data) == data


def test_the_recommendation_of_a_proposal_names_what_it_proposes():
    from tfperf.results.tune import Measurement, speedup

    base = Measurement("baseline", 0, {"batch_size": 32}, [100.0, 100.0], 0, None)
    pooled = Measurement("estimate-pool", 3, {"batch_size": 32}, [200.0, 200.0], 0, None)
    text = recommend(pooled, speedup(pooled, base), [])
    assert text.startswith("Use tfperf's estimate on the cores its input spends: 2.00x")


@pytest.mark.parametrize("kind", [k for k in Reference if k.proposed])
def test_every_proposal_round_trips_through_json_with_its_kind(kind):
    estimate = Estimate({"prefetch": 2}, 5.0, 3, 4.0, [], kind)
    loaded = validated(Estimate, json.loads(json.dumps(plain_dict(estimate))))
    assert loaded == estimate and loaded.kind is kind


def test_a_stored_tune_json_reads_its_knobs_as_records_and_writes_them_in_the_same_shape():
    """Knobs stored as plain mappings read as `Knobs`, and are written back as `to_dict()`
    writes them, so the JSON on disk keeps its shape."""
    stored = json.loads((STORED / "tune-result-four-estimate-fields.json").read_text())

    result = TuneResult.from_dict(stored)

    assert all(isinstance(m.knobs, Knobs) for m in [result.best, *result.estimates])
    assert result.baseline.knobs == Knobs.from_mapping(stored["baseline"]["knobs"])
    saved = json.loads(result.to_json())
    for side in ("best", "baseline"):
        assert saved[side]["knobs"] == stored[side]["knobs"]
    assert (
        saved["estimates"][0]["knobs"] == Knobs.from_mapping(stored["estimate"]["knobs"]).to_dict()
    )
    assert TuneResult.from_dict(saved) == result


def test_a_stored_knob_that_is_not_a_knob_is_named_with_its_field():
    with pytest.raises(ResultFileError, match=r"knobs: .*unknown knob name 'batch_sise'"):
        validated(Estimate, {"knobs": {"batch_sise": 8}, "predicted_examples_per_sec": 1.0})
