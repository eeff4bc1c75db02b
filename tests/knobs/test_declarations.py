"""A knob is one declaration: a knob declared in one place is searched, applied, read back,
reported, snippeted and patched, with no table elsewhere to fill in.

The throw-away knob is a real tf.data option, `experimental_optimization.map_parallelization`,
declared as one more field of a `Knobs` subclass that `KNOBS` is pointed at.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.reports import MIB, fake_profile
from tfperf.errors import KnobError
from tfperf.hardware import Machine
from tfperf.knobs import KNOBS, Fixed, Knobs
from tfperf.knobs._declare import Kind, choices, knob
from tfperf.knobs.declare import Applier
from tfperf.report import _study_summary as ss
from tfperf.report import render_summary
from tfperf.report._snippets import tf_data_snippet
from tfperf.report._words import knob_value
from tfperf.results.discovery import Discovery
from tfperf.results.stages import DatasetOptions
from tfperf.results.tune import Measurement
from tfperf.sites import patch_for, unplaceable
from tfperf.tuner._search import build_space, default_space, reference_params, suggest_knobs

NAME = "map_parallelization"
PATH = "experimental_optimization.map_parallelization"
UNSET = "maps run in parallel where tf.data finds it safe"


@dataclasses.dataclass(frozen=True)
class ExtendedKnobs(Knobs):
    """`Knobs` with one more knob: the only place the throw-away knob is declared."""

    map_parallelization: bool | None = knob(
        None,
        Kind.OPTIONAL_BOOL,
        "tf.data `experimental_optimization.map_parallelization`; None keeps tf.data's default.",
        applied_by=Applier.TF_DATA,
        option=PATH,
        unset=UNSET,
        search=choices(None, False),
    )


@pytest.fixture
def extended(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(KNOBS, "record", ExtendedKnobs)


MACHINE = Machine(
    cpu_count=2, total_ram_bytes=2**34, available_ram_bytes=2**33, gpu_names=(), cpu_bf16=False
)


def test_every_builtin_knob_declares_who_applies_it_and_what_none_means():
    for declared in KNOBS:
        assert declared.doc and declared.applied_by in Applier
        if declared.applied_by is Applier.TF_DATA:
            assert declared.option and declared.unset, declared.name
    assert KNOBS.names() == Knobs.names()
    assert KNOBS.batch_size.changes_training and not KNOBS.prefetch.changes_training


@pytest.mark.tf
def test_every_tf_data_option_knob_is_set_and_read_back_at_its_path():
    import tensorflow as tf

    from tfperf.frameworks.tensorflow._tf import apply_options, dataset_options

    for declared in KNOBS.applied_by(Applier.TF_DATA):
        value = False if declared.kind is Kind.OPTIONAL_BOOL else 2
        knobs = Knobs.from_mapping({declared.name: value})
        carried = dataset_options(apply_options(tf.data.Dataset.range(2), knobs))
        assert carried is not None and carried.carried(declared.name) == value, declared.name


def test_an_unknown_knob_is_an_error_not_a_fallback():
    with pytest.raises(KnobError, match=r"name 'batch_sise'\. Valid names: batch_size"):
        KNOBS["batch_sise"]
    with pytest.raises(AttributeError, match="no knob 'batch_sise'"):
        _ = KNOBS.batch_sise


def test_a_tf_data_option_knob_without_its_option_path_is_refused():
    with pytest.raises(ValueError, match="needs `option`, its attribute path"):
        knob(None, Kind.OPTIONAL_BOOL, "No path.", applied_by=Applier.TF_DATA)


@pytest.mark.usefixtures("extended")
def test_a_declared_knob_is_searched():
    baseline = ExtendedKnobs(batch_size=64)
    assert default_space(baseline, MACHINE)[NAME].values == (None, False)  # type: ignore[union-attr]
    space = build_space(baseline, MACHINE, {}, {})
    params = reference_params(baseline.replace(**{NAME: False}), space)
    assert params[NAME] is False

    import optuna

    trial = optuna.create_study().ask(fixed_distributions={})
    suggested = suggest_knobs(trial, {NAME: Fixed(False)}, baseline)
    assert isinstance(suggested, ExtendedKnobs) and suggested.map_parallelization is False


@pytest.mark.tf
@pytest.mark.usefixtures("extended")
def test_a_declared_knob_is_applied_to_a_real_dataset_and_read_back():
    import tensorflow as tf

    from tfperf.frameworks.tensorflow._tf import apply_options, dataset_options

    dataset = apply_options(tf.data.Dataset.range(4), ExtendedKnobs(map_parallelization=False))
    assert dataset.options().experimental_optimization.map_parallelization is False
    carried = dataset_options(dataset)
    assert carried is not None and carried.carried(NAME) is False
    assert list(dataset.as_numpy_iterator()) == [0, 1, 2, 3]


@pytest.mark.usefixtures("extended")
def test_a_declared_knob_is_reported():
    knobs = {**Knobs(batch_size=4).to_dict(), NAME: None}
    options = DatasetOptions.of({NAME: False}, autotune=None)
    result = dataclasses.replace(fake_profile(), knobs=knobs, dataset_options=options)
    assert f"{NAME}=False (set by the pipeline)" in render_summary(result)
    assert knob_value(None, NAME) == f"not set (tf.data's default: {UNSET})"

    baseline = _measured("baseline", ExtendedKnobs())
    best = _measured("trial 2", ExtendedKnobs(map_parallelization=False))
    assert ss.applied_edits(best, baseline) == [
        "Add to the dataset given to fit or your own loop: options = tf.data.Options(); "
        f"options.{PATH} = False; ds = ds.with_options(options)."
    ]


@pytest.mark.usefixtures("extended")
def test_a_declared_knob_is_snippeted():
    snippet = tf_data_snippet(ExtendedKnobs(map_parallelization=False).to_dict())
    assert f"options = tf.data.Options()\noptions.{PATH} = False\n" in snippet
    assert PATH not in tf_data_snippet(ExtendedKnobs().to_dict())


@pytest.mark.usefixtures("extended")
def test_a_declared_knob_is_patched_into_a_plain_file(tmp_path: Path):
    (tmp_path / "pipeline.py").write_text(
        "import tensorflow as tf\n\n\ndef make_dataset():\n    return tf.data.Dataset.range(8)\n"
    )
    discovery = Discovery(end="pipeline.py:4")
    assert NAME not in unplaceable(tmp_path, discovery, script=False)  # (no make_model here)
    after = ExtendedKnobs(map_parallelization=False).to_dict()
    patch = patch_for(tmp_path, discovery, ExtendedKnobs().to_dict(), after, script=False)
    assert f"+    options.{PATH} = False\n" in patch.diff
    assert ".with_options(options)" in patch.diff


def _measured(label: str, knobs: Knobs) -> Measurement:
    return Measurement(label, None, knobs.to_dict(), [1.0], 100 * MIB, None)
