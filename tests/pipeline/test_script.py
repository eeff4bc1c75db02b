"""Training scripts: run up to `model.fit`, measured there, and clear when they never get there."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from tfperf.cli.main import EXIT_USAGE, main
from tfperf.errors import PipelineFileError, PipelineRuntimeError
from tfperf.frameworks.tensorflow import discover_sites
from tfperf.frameworks.tensorflow._build import build
from tfperf.frameworks.tensorflow._loop import LoopCall
from tfperf.frameworks.tensorflow._script import fit_dataset, run_until_fit
from tfperf.knobs import Knobs
from tfperf.pipeline import PipelineKind, load_pipeline
from tfperf.results import TrialStatus
from tfperf.trials import Budgets, TrialRequest, run_trial, with_sites

pytestmark = pytest.mark.tf

TRAIN = """
import argparse
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--batch", type=int, default=8)
args = parser.parse_args()


def build():
    x, y = np.ones((64, 4), "float32"), np.zeros((64, 1), "float32")
    return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(64).batch(args.batch)


if __name__ == "__main__":
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    validation = tf.data.Dataset.from_tensor_slices(([[0.0] * 4], [[0.0]])).batch(4)
    model.fit(build(), validation_data=validation, epochs=3)
    Path(__file__).with_name("trained").write_text("the script went on after fit")
"""

NO_FIT = """
import tensorflow as tf

if __name__ == "__main__":
    ds = tf.data.Dataset.range(4).batch(2)
    print("evaluating only")
"""

EXITS = """
import sys
import keras

def main():
    sys.exit(3)
    keras.Sequential().fit(None)

if __name__ == "__main__":
    main()
"""


def write(folder: Path, source: str, name: str = "train.py") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    return path


def test_a_script_runs_until_fit_and_stops_there(tmp_path):
    import keras
    import tensorflow as tf

    argv, path_entries = sys.argv, list(sys.path)
    pipeline = load_pipeline(write(tmp_path, TRAIN), ["--batch", "16"])
    assert pipeline.kind is PipelineKind.SCRIPT and pipeline.module is None
    call = run_until_fit(pipeline)
    assert isinstance(call.model, keras.Model) and isinstance(call.x, tf.data.Dataset)
    assert call.where == "train.py:22"
    assert next(iter(call.x))[0].shape == (16, 4)  # the script saw --batch 16
    assert not (tmp_path / "trained").exists()
    assert "fit" not in keras.Model.__dict__  # fit is Keras's own again
    assert (sys.argv, sys.path) == (argv, path_entries)


def test_a_script_s_sites_are_those_of_the_dataset_given_to_fit(tmp_path):
    found = discover_sites(load_pipeline(write(tmp_path, TRAIN), ["--batch", "16"]))
    assert found.values() == {
        "shuffle@train.py:15.buffer_size": 64,
        "batch@train.py:15.batch_size": 16,
        "prefetch@train.py:22.buffer_size": 0,  # none at the end: tfperf may add one at fit
    }
    assert found.end == "train.py:22"


def test_site_values_reach_the_script_s_dataset(tmp_path):
    pipeline = load_pipeline(write(tmp_path, TRAIN))
    built = build(pipeline, Knobs().replace(**{"batch@train.py:15.batch_size": 4}))
    assert next(iter(built.dataset))[0].shape == (4, 4)
    assert built.discovery is not None and built.model is not None


def test_a_script_that_never_calls_fit_gets_a_clear_message(tmp_path):
    pipeline = load_pipeline(write(tmp_path, NO_FIT), ["--epochs", "3"])
    with pytest.raises(PipelineFileError) as caught:
        run_until_fit(pipeline)
    assert str(caught.value).startswith(
        "train.py ran to its end without calling `model.fit(...)` or training in a loop over a "
        "tf.data dataset, so tfperf had no training to measure. tfperf runs the script as "
        "`python train.py --epochs 3` and takes over at the first `fit` of a Keras model"
    )


def test_a_script_that_trains_in_its_own_loop_is_stopped_at_its_first_step(tmp_path):
    # Without the stop, the script trained all its epochs, then was told it never called fit.
    source = """
    from pathlib import Path
    import keras
    import tensorflow as tf
    ds = tf.data.Dataset.range(64).map(lambda i: (tf.ones((2,)), tf.zeros((1,)))).batch(8)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    opt = keras.optimizers.SGD()

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(x) - y) ** 2)
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                model.trainable_variables))

    for x, y in ds:
        train_step(x, y)
    Path(__file__).with_name("trained").write_text("the loop ran to its end")
    """
    path = write(tmp_path, source)
    pipeline = load_pipeline(path)
    assert pipeline.kind is PipelineKind.SCRIPT

    call = run_until_fit(pipeline)

    assert isinstance(call, LoopCall)  # the loop, found where it iterates its dataset
    assert call.where == "train.py:15"
    assert call.dataset.element_spec[0].shape.as_list() == [None, 2]
    assert not (tmp_path / "trained").exists()


def test_a_script_that_exits_before_fit_does_not_exit_tfperf(tmp_path):
    with pytest.raises(PipelineFileError) as caught:
        run_until_fit(load_pipeline(write(tmp_path, EXITS)))
    assert str(caught.value).startswith(
        "train.py called sys.exit(3) before reaching `model.fit(...)`, so tfperf had no model"
    )
    assert "`tfperf profile train.py -- --epochs 3`" in str(caught.value)


def test_an_unknown_argument_is_explained_as_an_exit(tmp_path, capsys):
    with pytest.raises(PipelineFileError, match=r"called sys.exit\(2\) before reaching"):
        run_until_fit(load_pipeline(write(tmp_path, TRAIN), ["--bogus"]))
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_a_script_that_raises_shows_its_line(tmp_path):
    source = "import keras\nif __name__ == '__main__':\n    raise ValueError('no data dir')\n"
    with pytest.raises(PipelineRuntimeError) as caught:
        run_until_fit(load_pipeline(write(tmp_path, source)))
    assert str(caught.value) == (
        "train.py raised ValueError before reaching `model.fit(...)`: no data dir\n"
        "  train.py:3 in <module>: raise ValueError('no data dir')"
    )


def test_arrays_given_to_fit_are_batched_as_keras_would(tmp_path):
    source = """
    import keras
    import numpy as np
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    model.fit(np.ones((10, 2)), np.zeros((10, 1)), batch_size=4)
    """
    call = run_until_fit(load_pipeline(write(tmp_path, source)))
    sizes = [int(x.shape[0]) for x, _ in fit_dataset(call, "train.py")]
    assert sizes == [4, 4, 2]


def test_a_pydataset_given_to_fit_is_refused_with_how_to_wrap_it(tmp_path):
    source = """
    import keras
    import numpy as np
    class Rows(keras.utils.PyDataset):
        def __len__(self):
            return 2
        def __getitem__(self, i):
            return np.ones((4, 2), "float32"), np.zeros((4, 1), "float32")
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    model.fit(Rows())
    """
    call = run_until_fit(load_pipeline(write(tmp_path, source)))
    with pytest.raises(PipelineFileError) as caught:
        fit_dataset(call, "train.py")
    message = str(caught.value)
    assert "gets x as a Rows (a keras.utils.PyDataset)" in message
    assert "tf.data.Dataset.from_generator(lambda: (rows[i] for i in range(len(rows)))" in message
    assert "non-rectangular" not in message  # no error of a conversion tfperf tried


def test_arrays_given_to_fit_are_fed_through_keras_own_pipeline(tmp_path):
    # fit holds out the validation split's last examples, shuffles each epoch and prefetches:
    # the dataset tfperf measures does too, so its advice never asks for a prefetch Keras
    # already adds.
    source = """
    import keras
    import numpy as np
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x = np.arange(20, dtype="float32").reshape(20, 1)
    model.fit(x, x, batch_size=4, validation_split=0.2)
    """
    call = run_until_fit(load_pipeline(write(tmp_path, source)))
    assert (call.shuffle, call.validation_split) == (True, 0.2)
    dataset = fit_dataset(call, "train.py")
    seen = [sorted(float(v) for x, _ in dataset for v in x.numpy().ravel()) for _ in range(2)]
    assert seen[0] == seen[1] == [float(v) for v in range(16)]  # the last 4 held out
    orders = [[float(v) for x, _ in dataset for v in x.numpy().ravel()] for _ in range(4)]
    assert len({tuple(order) for order in orders}) > 1  # a new order each epoch
    assert type(dataset).__name__.lstrip("_") == "PrefetchDataset"


def test_arrays_given_to_fit_leave_no_dataset_to_add_options_to_but_a_precision(tmp_path):
    # A tune once patched `model.fit(x_train.with_options(options), ...)` onto a NumPy array.
    from tfperf.sites import unplaceable

    source = """
    import keras
    import numpy as np
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    model.fit(np.ones((10, 2)), np.zeros((10, 1)), batch_size=4)
    """
    path = write(tmp_path, source)
    discovery = discover_sites(load_pipeline(path))
    assert discovery.fit_gets_arrays and discovery.end == "train.py:5"
    problems = unplaceable(tmp_path, discovery, script=True)
    assert "`fit` at train.py:5 gets arrays" in problems["private_threadpool_size"]
    assert "mixed_precision" not in problems


def test_profile_a_script_passes_its_arguments_and_lists_its_sites(tmp_path, capsys):
    path = write(tmp_path, TRAIN)
    reports = [f"--json={tmp_path / 'r.json'}", f"--html={tmp_path / 'r.html'}"]
    options = ["--steps", "3", "--warmup", "1", "--no-stages", "--quiet", "--verbose", *reports]
    status = main(["profile", str(path), *options, "--", "--batch", "4"])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "Tunable call sites (3), as written:\n" in out
    assert "  shuffle@train.py:15.buffer_size   64\n" in out
    assert "  batch@train.py:15.batch_size      4\n" in out
    assert "batch@train.py:15.batch_size=4" in out  # the configuration measured


def test_profile_a_script_that_never_calls_fit_exits_with_the_message(tmp_path, capsys):
    status = main(["profile", str(write(tmp_path, NO_FIT)), "--quiet"])
    assert status == EXIT_USAGE
    assert "train.py ran to its end without calling `model.fit(...)`" in capsys.readouterr().err


def test_discovery_in_a_child_process_reports_the_script_s_exit(tmp_path):
    with pytest.raises(PipelineFileError, match=r"^train.py called sys.exit\(3\) before"):
        with_sites(load_pipeline(write(tmp_path, EXITS)))


def test_a_trial_child_applies_site_values_to_a_script(tmp_path):
    path = write(tmp_path, TRAIN)
    knobs = Knobs().replace(**{"batch@train.py:15.batch_size": 4})
    request = TrialRequest(path, knobs, steps=3, warmup=1, argv=("--batch", "8"))
    outcome = run_trial(request, Budgets(timeout_s=120))
    assert outcome.status is TrialStatus.COMPLETE, outcome.reason
    assert outcome.result is not None
    phase = outcome.result.end_to_end
    assert phase.examples == 4 * phase.steps
    assert os.path.exists(tmp_path / "trained") is False
