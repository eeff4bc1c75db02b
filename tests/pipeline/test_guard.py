"""Importing a file taken for a pipeline file never trains: a `fit` reached on import stops it."""

from __future__ import annotations

import ast
import sys
import textwrap
from pathlib import Path

import keras
import pytest

from tfperf.errors import PipelineFileError
from tfperf.frameworks.tensorflow._guard import may_train
from tfperf.pipeline import load_pipeline

pytestmark = pytest.mark.tf

# The contract is there, so the syntax makes it a pipeline file; `main()` at the top level
# trains on import all the same, and its `except Exception` would swallow an ordinary error.
TRAINS_ON_IMPORT = """
from pathlib import Path

import numpy as np
import tensorflow as tf


def make_dataset():
    x, y = np.ones((16, 4), "float32"), np.zeros((16, 1), "float32")
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(8)


def make_model():
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    return model


def main():
    try:
        make_model().fit(make_dataset(), epochs=2)
    except Exception:
        pass
    Path(__file__).with_name("trained").write_text("training ran on import")


main()
"""


def test_a_fit_reached_while_importing_a_pipeline_file_stops_the_import(tmp_path: Path) -> None:
    path = tmp_path / "pipeline.py"
    path.write_text(textwrap.dedent(TRAINS_ON_IMPORT).lstrip(), encoding="utf-8")
    real_fit = keras.Model.fit

    with pytest.raises(PipelineFileError) as caught:
        load_pipeline(path)

    message = str(caught.value)
    assert "started training (`fit` at pipeline.py:20)" in message
    assert '`if __name__ == "__main__":`' in message
    assert not (tmp_path / "trained").exists()
    assert keras.Model.fit is real_fit


def test_a_step_of_a_custom_loop_reached_on_import_stops_the_import_too(tmp_path: Path) -> None:
    # The contract is there, and `main()` at the top level runs a loop of train_on_batch.
    source = TRAINS_ON_IMPORT.replace(
        "make_model().fit(make_dataset(), epochs=2)",
        "model = make_model()\n        for x, y in make_dataset():\n"
        "            model.train_on_batch(x, y)",
    )
    path = tmp_path / "pipeline.py"
    path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")

    with pytest.raises(PipelineFileError) as caught:
        load_pipeline(path)

    assert "started training (`train_on_batch` at pipeline.py:22)" in str(caught.value)
    assert not (tmp_path / "trained").exists()


def test_a_pipeline_file_that_does_not_train_on_import_loads(tmp_path: Path) -> None:
    source = TRAINS_ON_IMPORT.replace("\nmain()\n", '\nif __name__ == "__main__":\n    main()\n')
    path = tmp_path / "pipeline.py"
    path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")

    pipeline = load_pipeline(path)

    assert pipeline.make_dataset is not None
    assert not (tmp_path / "trained").exists()


@pytest.mark.parametrize(
    ("source", "sibling", "expected"),
    [
        pytest.param("import tensorflow as tf", None, True, id="tensorflow"),
        pytest.param("from keras import layers", None, True, id="keras"),
        pytest.param("import helpers", "helpers.py", True, id="own-module"),
        pytest.param("import json", None, False, id="nothing-that-trains"),
    ],
)
def test_what_may_train_on_import(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    source: str,
    sibling: str | None,
    expected: bool,
) -> None:
    monkeypatch.delitem(sys.modules, "keras")
    if sibling:
        (tmp_path / sibling).write_text("", encoding="utf-8")
    assert may_train(ast.parse(source), tmp_path) is expected
