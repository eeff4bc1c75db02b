"""TensorFlow scripts that train in their own loop: found as they train, served, patched."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.deadlines import HANG_S
from tfperf.errors import PipelineFileError
from tfperf.frameworks.tensorflow import discover_sites, profile_pipeline
from tfperf.frameworks.tensorflow._loop import LoopCall
from tfperf.frameworks.tensorflow._script import run_until_fit
from tfperf.knobs import AUTOTUNE
from tfperf.pipeline import load_pipeline

pytestmark = pytest.mark.tf

#: The guide's shape: a look at one batch, a `tf.function` step, epochs of a finite dataset,
#: an evaluation pass after each epoch, and work after the loop that must never run.
LOOP = """
import sys
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
x = rng.standard_normal((512, 8)).astype("float32")
y = x.sum(axis=1, keepdims=True)
train = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(128).map(lambda a, b: (a * 2.0, b))
train = train.batch(16)
val = tf.data.Dataset.from_tensor_slices((x[:64], y[:64])).batch(16)
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)])
opt = keras.optimizers.SGD(0.01)

for xb, yb in train.take(1):
    print("batch", xb.shape)


@tf.function
def train_step(xb, yb):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((model(xb) - yb) ** 2)
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                            model.trainable_variables))
    return loss


epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 50
for epoch in range(epochs):
    for step, (xb, yb) in enumerate(train):
        train_step(xb, yb)
    for xb, yb in val:
        model(xb)
Path(__file__).with_name("trained").write_text("the loop ran to its end")
"""
#: The line of the training loop's `for` in LOOP.
LOOP_LINE = 32
#: The training loop of LOOP, for the tests that change it.
LOOP_BODY = "    for step, (xb, yb) in enumerate(train):\n        train_step(xb, yb)\n"
#: LOOP with a loop that breaks after 10 steps of each epoch.
BREAKS_AFTER_10 = LOOP.replace(
    "        train_step(xb, yb)\n",
    "        train_step(xb, yb)\n        if step == 9:\n            break\n",
)


def write(folder: Path, source: str) -> Path:
    path = folder / "train.py"
    path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    return path


def stopped(folder: Path, source: str) -> str:
    """Why the script `source` was stopped before it trained (its epochs never ran)."""
    with pytest.raises(PipelineFileError) as caught:
        run_until_fit(load_pipeline(write(folder, source)))
    assert not (folder / "trained").exists()
    return str(caught.value)


def test_the_training_loop_is_found_past_a_look_at_one_batch(tmp_path):
    call = run_until_fit(load_pipeline(write(tmp_path, LOOP)))

    assert isinstance(call, LoopCall)
    assert call.where == f"train.py:{LOOP_LINE}"  # not the `take(1)` look at line 17
    assert call.dataset.cardinality().numpy() == 32
    assert not (tmp_path / "trained").exists()


def test_a_loop_that_iterates_inside_a_tf_function_is_stopped_and_told_why(tmp_path):
    source = LOOP.replace(
        LOOP_BODY, "    tf.function(lambda: [train_step(a, b) for a, b in train])()\n"
    ).replace("for xb, yb in train.take(1):\n    print", "if False:\n    print")
    message = stopped(tmp_path, source)
    assert message.startswith("train.py trains in its own loop: it reached `GradientTape.gradient`")
    assert "inside a `tf.function`" in message


def test_a_custom_loop_is_profiled_as_it_trains(tmp_path):
    pipeline = load_pipeline(write(tmp_path, LOOP))
    result = profile_pipeline(pipeline, steps=70, warmup=2, analyse_stages=False)

    for measured in (result.end_to_end, result.pipeline_only, result.compute_only):
        assert measured is not None and measured.steps >= 70
    assert result.end_to_end.examples_per_sec > 0
    assert result.discovery is not None
    assert result.discovery.end == f"train.py:{LOOP_LINE}"
    names = {site.name for site in result.discovery.sites}
    assert "map@train.py:11.num_parallel_calls" in names
    assert f"prefetch@train.py:{LOOP_LINE}.buffer_size" in names  # one tfperf may add
    assert result.knobs["shuffle@train.py:11.buffer_size"] == 128
    assert result.restarts is not None and result.restarts.epoch_steps == 32
    assert not (tmp_path / "trained").exists()


def test_a_loop_over_itertools_cycle_is_said_to_replay_its_first_pass(tmp_path):
    """cycle(train) keeps the first pass's batches: the loop is served fresh passes, and the
    finding says what the script as written trains on."""
    cycled = LOOP.replace("import sys\n", "import itertools\nimport sys\n", 1).replace(
        LOOP_BODY,
        "    for step, (xb, yb) in zip(range(32), itertools.cycle(train)):\n"
        "        train_step(xb, yb)\n",
    )
    result = profile_pipeline(
        load_pipeline(write(tmp_path, cycled)), steps=20, warmup=2, analyse_stages=False
    )
    assert result.cycled == f"train.py:{LOOP_LINE + 1}"
    (finding,) = [f for f in result.findings if f.rule == "cycled"]
    assert finding.hazard and "replays them in the same order" in finding.text


def test_a_loop_that_breaks_early_sets_the_epoch(tmp_path):
    result = profile_pipeline(
        load_pipeline(write(tmp_path, BREAKS_AFTER_10)), steps=25, warmup=2, analyse_stages=False
    )
    assert result.restarts is not None
    assert result.restarts.epoch_steps == 10
    assert result.restarts.epoch_source.value == "loop"


def test_the_loops_patch_applies_and_the_patched_script_runs(tmp_path):
    path = write(tmp_path, LOOP)
    pipeline = load_pipeline(path, ["1"])
    discovery = discover_sites(pipeline)
    pipeline = pipeline.with_discovery(discovery)
    assert discovery.end == f"train.py:{LOOP_LINE}"
    inserted = next(s for s in discovery.sites if s.calls == 0 and s.method == "prefetch")
    before = pipeline.baseline.to_dict()
    after = {
        **before,
        "private_threadpool_size": 2,
        "sites": {**before["sites"], inserted.name: AUTOTUNE},
    }
    from tfperf.sites import patch_for

    patch = patch_for(tmp_path, discovery, before, after, script=True)
    assert "    options.threading.private_threadpool_size = 2\n" in patch.diff
    assert "enumerate(train.prefetch(tf.data.AUTOTUNE).with_options(options)):" in patch.diff
    copy = tmp_path / "patched"
    copy.mkdir()
    shutil.copy(path, copy / "train.py")
    subprocess.run(["patch", "-p0"], input=patch.diff, text=True, cwd=copy, check=True)
    ran = subprocess.run(
        [sys.executable, "train.py", "1"], cwd=copy, capture_output=True, text=True, timeout=HANG_S
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert (copy / "trained").exists()


def test_a_step_that_calls_next_inside_a_tf_function_is_stopped_and_told_why(tmp_path):
    source = LOOP.replace(
        LOOP_BODY, "    it = iter(train.repeat())\n    for step in range(20):\n        pulled(it)\n"
    ).replace(
        "epochs = int(",
        "@tf.function\ndef pulled(it):\n    return train_step(*next(it))\n\n\nepochs = int(",
    )
    message = stopped(tmp_path, source)
    assert message.startswith("train.py passes the iterator it makes at train.py:")
    assert "calls `next()` inside it" in message


def test_a_loop_that_ends_before_its_phases_is_refused_with_its_count(tmp_path):
    pipeline = load_pipeline(write(tmp_path, BREAKS_AFTER_10), ["2"])
    with pytest.raises(PipelineFileError) as caught:
        profile_pipeline(pipeline, steps=30, warmup=2, analyse_stages=False)
    assert str(caught.value).startswith(
        "train.py's training loop took 20 batches in all and then ended, before tfperf had "
        "measured it; each phase takes at least 30 steps, so the code after the loop ran"
    )


def test_a_loop_that_reads_two_datasets_in_step_is_stopped_while_served(tmp_path):
    # zip(train, val) in Python: one dataset is served, the other runs as written in the
    # loop's body, where its batches would be timed as the model's. (LOOP's own validation
    # pass after each epoch reads a second dataset too, and is served: its profile test.)
    zipped = LOOP.replace(
        LOOP_BODY,
        "    for step, ((xb, yb), _) in enumerate(zip(train, val.repeat())):\n"
        "        train_step(xb, yb)\n",
    )
    assert zipped != LOOP
    with pytest.raises(PipelineFileError) as caught:
        profile_pipeline(load_pipeline(write(tmp_path, zipped)), steps=30, warmup=2)
    assert str(caught.value).startswith(
        f"train.py's training loop reads two datasets in step (iterated at train.py:{LOOP_LINE})"
    )
    assert "`tf.data.Dataset.zip((a, b))`" in str(caught.value)
    assert not (tmp_path / "trained").exists()


def test_a_loop_over_a_distributed_dataset_is_stopped_not_served(tmp_path):
    source = """
    from pathlib import Path
    import keras
    import tensorflow as tf

    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    ds = tf.data.Dataset.range(64).map(lambda i: (tf.ones((2,)), tf.zeros((1,)))).batch(8)
    with strategy.scope():
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        opt = keras.optimizers.SGD()


    @tf.function
    def step(x, y):
        def replica(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((model(x) - y) ** 2)
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
        strategy.run(replica, args=(x, y))


    for x, y in strategy.experimental_distribute_dataset(ds):
        step(x, y)
    Path(__file__).with_name("trained").write_text("the loop ran to its end")
    """
    assert "from a distributed dataset" in stopped(tmp_path, source)


def test_a_loop_that_updates_variables_by_hand_is_found_at_its_first_gradient(tmp_path):
    # TensorFlow's "custom training basics": no Keras optimizer. Before, the file was taken
    # for a pipeline file and imported: all its epochs trained, then "defines no make_dataset".
    source = """
    from pathlib import Path
    import tensorflow as tf

    x = tf.random.normal([400])
    dataset = tf.data.Dataset.from_tensor_slices((x, 3 * x + 2)).batch(50)
    w, b = tf.Variable(5.0), tf.Variable(0.0)


    def train(xb, yb):
        with tf.GradientTape() as t:
            loss = tf.reduce_mean(tf.square(yb - (w * xb + b)))
        dw, db = t.gradient(loss, [w, b])
        w.assign_sub(0.1 * dw)
        b.assign_sub(0.1 * db)


    for epoch in range(10):
        for xb, yb in dataset:
            train(xb, yb)
    Path(__file__).with_name("trained").write_text("the loop ran to its end")
    """
    pipeline = load_pipeline(write(tmp_path, source))
    assert pipeline.kind.value == "script"
    call = run_until_fit(pipeline)
    assert isinstance(call, LoopCall) and call.where == "train.py:18"
    assert not (tmp_path / "trained").exists()


def test_the_compute_only_phase_replays_the_loops_mix_of_batch_shapes(tmp_path):
    # 70 examples in batches of 32: every pass ends in a batch of 6. Replaying only the last
    # batch served made the ceiling that of 6-example steps (or of 32-example ones).
    source = LOOP.replace("rng.standard_normal((512, 8))", "rng.standard_normal((70, 8))")
    source = source.replace(".batch(16)\n", ".batch(32)\n", 1)
    result = profile_pipeline(
        load_pipeline(write(tmp_path, source)), steps=30, warmup=2, analyse_stages=False
    )
    assert {shape.examples for shape in result.batch_shapes} == {32, 6}
    compute = result.compute_only
    assert compute is not None
    assert 6 < compute.examples / compute.steps < 32


def test_the_bundled_example_is_a_loop_that_tfperf_finds_and_can_patch():
    example = Path(__file__).resolve().parents[3] / "examples" / "custom_loop" / "train.py"
    pipeline = load_pipeline(example, ["--epochs", "1"])
    discovery = discover_sites(pipeline)
    assert discovery.end == "train.py:55"
    assert "map@train.py:35.num_parallel_calls" in {site.name for site in discovery.sites}
    assert "prefetch@train.py:55.buffer_size" in {site.name for site in discovery.sites}


def test_a_dataset_that_fails_while_served_is_explained_at_the_users_line(tmp_path):
    # The served phases' failure reached the runner's explanation before any build had
    # returned: AttributeError: 'PipelineMeasurement' object has no attribute 'built'.
    source = """
    import numpy as np
    import tensorflow as tf


    def read(i):
        if i == 700:
            raise ValueError("record 700 is corrupt")
        return np.float32(i)


    ds = tf.data.Dataset.range(2000).map(lambda i: tf.numpy_function(read, [i], tf.float32))
    ds = ds.batch(10)
    w = tf.Variable(1.0)
    for epoch in range(3):
        for xb in ds:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((w * xb) ** 2)
            w.assign_sub(1e-9 * tape.gradient(loss, w))
    """
    from tfperf.errors import PipelineRuntimeError

    with pytest.raises(PipelineRuntimeError) as caught:
        profile_pipeline(load_pipeline(write(tmp_path, source)), steps=90, analyse_stages=False)
    message = str(caught.value)
    assert message.startswith("train.py: the dataset failed while producing batch 71: ")
    assert "record 700 is corrupt" in message
