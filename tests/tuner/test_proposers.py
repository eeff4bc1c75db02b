"""The model's proposals: a list of small named proposers, and what adding one takes."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Sequence

import pytest

import tfperf.results._json
from tests.fakes.trials import fake_result
from tests.pipelines import TUNER_SOURCE
from tests.tuner.test_guide import _FREE, _GUIDABLE, MACHINE, ParseRunner, with_parse
from tfperf.knobs import AUTOTUNE, Knobs
from tfperf.pipeline import load_pipeline
from tfperf.report import render_tune_summary
from tfperf.report._study_data import snapshot_study
from tfperf.report._study_headline import headline
from tfperf.results._references import REFERENCE_WORDS, ReferenceWords
from tfperf.results.tune import Estimate, Reference, TuneResult
from tfperf.study.records import TrialRecord
from tfperf.tuner import TuneOptions, Tuner, _proposers
from tfperf.tuner._guide import make_guide
from tfperf.tuner._proposers import PROPOSERS, Fit, propose

BASELINE = Knobs(batch_size=32, num_parallel_calls=1, prefetch=0)


def test_every_proposer_says_what_it_proposes():
    for proposer in PROPOSERS:
        assert proposer.__doc__ and not proposer.__name__.startswith("_")


def test_the_proposers_run_in_order_and_each_sees_the_ones_before_it():
    guide = make_guide(with_parse(fake_result(BASELINE, 0.01)), MACHINE, BASELINE, _FREE, _GUIDABLE)
    assert guide is not None
    seen: list[list[Reference]] = []

    def watcher(fit: Fit, proposed: Sequence[Estimate]) -> Estimate | None:
        seen.append([e.kind for e in proposed])
        return None

    fit = _fit()
    assert [e.kind for e in propose(fit, (*PROPOSERS, watcher))] == [
        Reference.ESTIMATE,
        Reference.POOL,
    ]
    assert seen == [[Reference.ESTIMATE, Reference.POOL]]
    assert propose(fit) == guide.estimates
    # Without the pool among the knobs tfperf sizes, nothing proposes it.
    assert [e.kind for e in propose(dataclasses.replace(fit, guidable=("prefetch",)))] == [
        Reference.ESTIMATE
    ]


def _fit() -> Fit:
    from tfperf.measure import model_from_profile
    from tfperf.tuner._guide import cycle_caps

    model = model_from_profile(with_parse(fake_result(BASELINE, 0.01)), MACHINE.cpu_count)
    assert model is not None
    caps = cycle_caps(BASELINE, _FREE, model, MACHINE.cpu_count)
    return Fit(model, None, BASELINE, _FREE, tuple(_GUIDABLE), caps, MACHINE)


# --- adding a proposer -----------------------------------------------------------------------


@pytest.fixture
def deeper(monkeypatch) -> Iterator[Reference]:
    """A fifth kind of proposal, `estimate-deeper`, with its words.

    In the code this is one member of `Reference` and one entry of `REFERENCE_WORDS`. A Python
    enum is closed once made, so the test adds the member the way the class statement would
    have, and takes it out again after.
    """
    name, value = "DEEPER", "estimate-deeper"
    member = str.__new__(Reference, value)
    member._name_, member._value_ = name, value
    member.__objclass__ = Reference
    Reference._member_map_[name] = member
    Reference._value2member_map_[value] = member
    Reference._member_names_.append(name)
    words = ReferenceWords(
        "tfperf's estimate with a deeper prefetch",
        summary="its estimate with a deeper prefetch",
        headline="Its estimate with a deeper prefetch",
    )
    monkeypatch.setitem(REFERENCE_WORDS, member, words)
    monkeypatch.setattr(tfperf.results._json, "_ADAPTERS", {})  # validators see the member
    try:
        yield member
    finally:
        Reference._member_names_.remove(name)
        del Reference._member_map_[name], Reference._value2member_map_[value]
        tfperf.results._json._ADAPTERS.clear()


def test_a_fifth_proposer_is_one_function_and_one_entry_of_words(
    deeper, monkeypatch, write_pipeline, tmp_path
):
    def deeper_prefetch(fit: Fit, proposed: Sequence[Estimate]) -> Estimate | None:
        """The estimate with a prefetch of 8 batches."""
        first = proposed[0]
        knobs = first.knobs.replace(prefetch=8)
        return dataclasses.replace(first, knobs=knobs, kind=deeper)

    monkeypatch.setattr(_proposers, "PROPOSERS", (*PROPOSERS, deeper_prefetch))
    pipeline = load_pipeline(write_pipeline(TUNER_SOURCE))
    options = TuneOptions(
        trials=6, storage=f"sqlite:///{tmp_path / 'study.db'}", seed=1, rounds=1, finalists=1
    )
    runner = ParseRunner()
    tuner = Tuner(pipeline, options, runner=runner, machine=MACHINE)
    result = tuner.run()

    # Measured as a reference after the pooled estimate, labelled by its kind in the study.
    requests = [r.knobs for r in runner.requests]
    assert (requests[2].prefetch, requests[3].prefetch, requests[4].prefetch) == (AUTOTUNE, 2, 8)
    labels = [TrialRecord.from_trial(t).reference for t in tuner.ledger.study.trials[:5]]
    assert labels == ["baseline", "autotune", "estimate", "estimate-pool", "estimate-deeper"]
    # In the result, and through its JSON.
    found = result.estimate_of(deeper)
    assert found is not None and found.trial_number == 4
    assert found.measured_examples_per_sec is not None
    saved = TuneResult.from_dict(json.loads(result.to_json()))
    assert [e.kind for e in saved.estimates][-1] is deeper
    # In the terminal summary and the study page's headline, by its words.
    assert "its estimate with a deeper prefetch (trial 4): predicted" in (
        render_tune_summary(result)
    )
    snapshot = snapshot_study(tuner.ledger.study, "memory")
    line = headline(snapshot, None, result).estimate
    assert line is not None and "Its estimate with a deeper prefetch predicted" in line
