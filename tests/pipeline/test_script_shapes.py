"""Training scripts as people write them: each shape is found, patched, applied and run.

Issue 15 item 5. For each shape of script (validation data, a helper module, a class, `tf.keras`
or `keras`, `argparse` or `absl.flags`, `strategy.scope()`, a script's own `make_model()` beside
a top-level `fit`, a `tf.compat.v1` loader) the script's call sites are found by running it up
to `fit` (nothing trains), every knob a zero-change study searches is placeable, the patch of a
configuration that changes each kind of edit (a value rewritten, tf.data options and a prefetch
inserted, a precision policy set) applies with `patch -p0` and with `git apply` to the same
files, and the patched script trains one real step.

The sites are found in this process (as `tfperf tune`'s child does) and the patch is made from
a chosen configuration (as the tuner makes it from the winner's): a real `tfperf tune` costs
about 30 s a script on two cores; `tests/tuner/test_handover.py` covers the tuner's part. The
patched script runs in a fresh process, as `python train.py ARGS` would.
"""

from __future__ import annotations

import dataclasses
import filecmp
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.deadlines import HANG_S
from tfperf.frameworks.tensorflow import discover_sites
from tfperf.knobs import AUTOTUNE
from tfperf.pipeline import PipelineKind, load_pipeline
from tfperf.results.discovery import Discovery
from tfperf.sites import patch_for, unplaceable

pytestmark = pytest.mark.tf

#: Every script trains `TRAIN_STEPS` steps (or its `--steps` flag) and then writes how many steps
#: its optimizer took to a file `trained` beside it.
TRAINED = 'Path(__file__).with_name("trained").write_text(str(int(model.optimizer.iterations)))'


@dataclasses.dataclass(frozen=True)
class Shape:
    """A script (and its sibling modules), how it is run, and what its patch must hold.

    `sites` is every call site found (and the prefetch tfperf may add where the dataset is
    handed to `fit`), with its value as written; `rewritten` the lines the patch
    must write (values, inserted options and prefetch, the policy). `trained` is how many steps
    the patched script takes with `TRAIN_STEPS=1` (or `--steps 1`): one per epoch.
    """

    files: Mapping[str, str]
    sites: Mapping[str, int | None]
    rewritten: tuple[str, ...]
    argv: tuple[str, ...] = ()
    run_argv: tuple[str, ...] = ()
    precision: str | None = None
    trained: int = 1


VALIDATION = Shape(
    files={
        "train.py": f"""
        import os
        from pathlib import Path

        import keras
        import numpy as np
        import tensorflow as tf


        def dataset(n):
            x, y = np.ones((n, 4), "float32"), np.zeros((n, 1), "float32")
            ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(n)
            ds = ds.map(lambda a, b: (a * 2, b), num_parallel_calls=1)
            return ds.batch(8)


        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss="mse")
        steps = int(os.environ.get("TRAIN_STEPS", "8"))
        model.fit(dataset(64), validation_data=dataset(16), epochs=1, steps_per_epoch=steps)
        {TRAINED}
        """
    },
    # `shuffle(n)` takes 64 and 16: not tunable (tfperf names it), and a variable anyway.
    sites={
        "map@train.py:12.num_parallel_calls": 1,
        "batch@train.py:13.batch_size": 8,
        "prefetch@train.py:19.buffer_size": 0,
    },
    rewritten=(
        "+    ds = ds.map(lambda a, b: (a * 2, b), num_parallel_calls=tf.data.AUTOTUNE)\n",
        "+options = tf.data.Options()\n+options.threading.private_threadpool_size = 2\n",
        "+model.fit(dataset(64).prefetch(tf.data.AUTOTUNE).with_options(options), "
        "validation_data=dataset(16), epochs=1, steps_per_epoch=steps)\n",
    ),
)

HELPER_MODULE = Shape(
    files={
        "data.py": """
        import tensorflow as tf


        def features(i):
            x = tf.fill([4], tf.cast(i, tf.float32))
            return x, tf.reduce_sum(x, keepdims=True)


        def load(n, batch_size=8):
            ds = tf.data.Dataset.range(n).map(features, num_parallel_calls=2)
            return ds.batch(batch_size, drop_remainder=True)
        """,
        "train.py": f"""
        import os
        from pathlib import Path

        import keras

        import data

        if __name__ == "__main__":
            model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
            model.compile(optimizer="adam", loss="mse")
            model.fit(data.load(64), steps_per_epoch=int(os.environ.get("TRAIN_STEPS", 8)))
            {TRAINED}
        """,
    },
    sites={
        "map@data.py:10.num_parallel_calls": 2,
        "batch@data.py:11.batch_size": 8,
        "prefetch@train.py:11.buffer_size": 0,
    },
    rewritten=(
        "+    ds = tf.data.Dataset.range(n).map(features, num_parallel_calls=tf.data.AUTOTUNE)\n",
        # train.py has no `import tensorflow` of its own: the patch adds one for the options.
        ' import data\n+keras.mixed_precision.set_global_policy("mixed_bfloat16")\n'
        "+import tensorflow as tf\n",
        "+    model.fit(data.load(64).prefetch(tf.data.AUTOTUNE).with_options(options), ",
    ),
    precision="mixed_bfloat16",
)

CLASS = Shape(
    files={
        "train.py": f"""
        import os
        from pathlib import Path

        import keras
        import tensorflow as tf


        class Input:
            def __init__(self, examples, batch_size):
                self.examples = examples
                self.batch_size = batch_size

            def dataset(self):
                ds = tf.data.Dataset.range(self.examples)
                ds = ds.map(self.parse, num_parallel_calls=1)
                return ds.batch(self.batch_size).prefetch(1)

            def parse(self, i):
                return tf.fill([4], tf.cast(i, tf.float32)), tf.zeros([1])


        class Trainer:
            def __init__(self):
                self.model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
                self.model.compile(optimizer="sgd", loss="mse")

            def train(self, data):
                steps = int(os.environ.get("TRAIN_STEPS", "8"))
                self.model.fit(data.dataset(), epochs=1, steps_per_epoch=steps)
                return self.model


        model = Trainer().train(Input(64, 8))
        {TRAINED}
        """
    },
    sites={
        "map@train.py:15.num_parallel_calls": 1,
        "batch@train.py:16.batch_size": 8,
        "prefetch@train.py:16.buffer_size": 1,
    },
    rewritten=(
        "+        ds = ds.map(self.parse, num_parallel_calls=tf.data.AUTOTUNE)\n",
        "+        return ds.batch(self.batch_size).prefetch(tf.data.AUTOTUNE)\n",
        "+        options = tf.data.Options()\n",
        "+        self.model.fit(data.dataset().with_options(options), ",
    ),
)

TF_KERAS = Shape(
    files={
        "train.py": f"""
        import os
        from pathlib import Path

        import tensorflow as tf


        def build_dataset():
            ds = tf.data.Dataset.range(64).map(
                lambda i: (tf.fill([4], tf.cast(i, tf.float32)), tf.zeros([1])),
                num_parallel_calls=tf.data.AUTOTUNE,
            )
            return ds.batch(8)


        model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss="mse")
        model.fit(build_dataset(), epochs=1, steps_per_epoch=int(os.environ.get("TRAIN_STEPS", 8)))
        {TRAINED}
        """
    },
    sites={
        "map@train.py:8.num_parallel_calls": AUTOTUNE,
        "batch@train.py:12.batch_size": 8,
        "prefetch@train.py:17.buffer_size": 0,
    },
    rewritten=(
        '+tf.keras.mixed_precision.set_global_policy("mixed_bfloat16")\n',
        "+model.fit(build_dataset().prefetch(tf.data.AUTOTUNE).with_options(options), ",
    ),
    precision="mixed_bfloat16",
)

KERAS = Shape(
    files={
        "train.py": f"""
        import os
        from pathlib import Path

        import keras
        import tensorflow as tf
        from keras import layers

        ds = tf.data.Dataset.range(64).shuffle(64, seed=1)
        ds = ds.map(lambda i: (tf.fill([4], tf.cast(i, tf.float32)), tf.zeros([1])))
        ds = ds.batch(8)

        inputs = keras.Input((4,))
        model = keras.Model(inputs, layers.Dense(1)(layers.Dense(8, activation="relu")(inputs)))
        model.compile(optimizer="sgd", loss="mse")
        model.fit(ds, epochs=1, steps_per_epoch=int(os.environ.get("TRAIN_STEPS", 8)))
        {TRAINED}
        """
    },
    sites={
        "shuffle@train.py:8.buffer_size": 64,
        "map@train.py:9.num_parallel_calls": None,
        "batch@train.py:10.batch_size": 8,
        "prefetch@train.py:15.buffer_size": 0,
    },
    rewritten=(
        "+ds = ds.map(lambda i: (tf.fill([4], tf.cast(i, tf.float32)), tf.zeros([1])), "
        "num_parallel_calls=tf.data.AUTOTUNE)\n",
        '+keras.mixed_precision.set_global_policy("mixed_bfloat16")\n',
        "+model.fit(ds.prefetch(tf.data.AUTOTUNE).with_options(options), ",
    ),
    precision="mixed_bfloat16",
)

ARGPARSE = Shape(
    files={
        "train.py": f"""
        import argparse
        from pathlib import Path

        import keras
        import tensorflow as tf


        def parse_args():
            parser = argparse.ArgumentParser(description="trains a tiny model")
            parser.add_argument("--batch-size", type=int, default=32)
            parser.add_argument("--steps", type=int, default=8)
            return parser.parse_args()


        def main():
            args = parse_args()
            ds = tf.data.Dataset.range(64).map(
                lambda i: (tf.fill([4], tf.cast(i, "float32")), tf.zeros([1])), num_parallel_calls=1
            )
            ds = ds.batch(args.batch_size)
            model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
            model.compile(optimizer="sgd", loss="mse")
            model.fit(ds, epochs=1, steps_per_epoch=args.steps)
            return model


        if __name__ == "__main__":
            model = main()
            {TRAINED}
        """
    },
    sites={
        "map@train.py:17.num_parallel_calls": 1,
        "batch@train.py:20.batch_size": 16,  # the script saw `--batch-size 16`
        "prefetch@train.py:23.buffer_size": 0,
    },
    rewritten=(
        '+        lambda i: (tf.fill([4], tf.cast(i, "float32")), tf.zeros([1])), '
        "num_parallel_calls=tf.data.AUTOTUNE\n",
        "+    options = tf.data.Options()\n",
        "+    model.fit(ds.prefetch(tf.data.AUTOTUNE).with_options(options), ",
    ),
    argv=("--batch-size", "16"),
    run_argv=("--batch-size", "16", "--steps", "1"),
)

ABSL_FLAGS = Shape(
    files={
        "train.py": f"""
        from pathlib import Path

        import keras
        import tensorflow as tf
        from absl import app, flags

        FLAGS = flags.FLAGS
        flags.DEFINE_integer("batch_size", 32, "examples per batch")
        flags.DEFINE_integer("steps", 8, "steps per epoch")


        def main(argv):
            del argv
            ds = tf.data.Dataset.range(64).map(
                lambda i: (tf.fill([4], tf.cast(i, "float32")), tf.zeros([1])), num_parallel_calls=1
            )
            ds = ds.batch(FLAGS.batch_size).prefetch(2)
            model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
            model.compile(optimizer="sgd", loss="mse")
            model.fit(ds, epochs=1, steps_per_epoch=FLAGS.steps)
            {TRAINED}


        if __name__ == "__main__":
            app.run(main)
        """
    },
    sites={
        "map@train.py:14.num_parallel_calls": 1,
        "batch@train.py:17.batch_size": 16,  # the script saw `--batch_size=16`
        "prefetch@train.py:17.buffer_size": 2,
    },
    rewritten=(
        "+    ds = ds.batch(FLAGS.batch_size).prefetch(tf.data.AUTOTUNE)\n",
        "+    model.fit(ds.with_options(options), epochs=1, steps_per_epoch=FLAGS.steps)\n",
    ),
    argv=("--batch_size=16",),
    run_argv=("--batch_size=16", "--steps=1"),
)

STRATEGY_SCOPE = Shape(
    files={
        "train.py": f"""
        import os
        from pathlib import Path

        import keras
        import tensorflow as tf

        strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
        ds = tf.data.Dataset.range(64).map(
            lambda i: (tf.fill([4], tf.cast(i, "float32")), tf.zeros([1])), num_parallel_calls=1
        )
        ds = ds.batch(8 * strategy.num_replicas_in_sync)

        with strategy.scope():
            model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
            model.compile(optimizer="sgd", loss="mse")
            model.fit(ds, epochs=1, steps_per_epoch=int(os.environ.get("TRAIN_STEPS", 8)))
        {TRAINED}
        """
    },
    sites={
        "map@train.py:8.num_parallel_calls": 1,
        "batch@train.py:11.batch_size": 8,
        "prefetch@train.py:16.buffer_size": 0,
    },
    rewritten=(
        "+    options = tf.data.Options()\n",
        "+    model.fit(ds.prefetch(tf.data.AUTOTUNE).with_options(options), ",
    ),
)

#: A script with its own `make_model()` and a `get_dataset()` helper, and `fit` at the top
#: level: a script, never imported as a pipeline file (which would train on import).
OWN_HELPERS = Shape(
    files={
        "train.py": f"""
        import os
        from pathlib import Path

        import keras
        import tensorflow as tf


        def get_dataset(batch_size=8):
            ds = tf.data.Dataset.range(64)
            ds = ds.map(lambda i: (tf.fill([4], tf.cast(i, tf.float32)), tf.zeros([1])), 2)
            return ds.batch(batch_size)


        def make_model():
            model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
            model.compile(optimizer="sgd", loss="mse")
            return model


        model = make_model()
        model.fit(get_dataset(), epochs=2, steps_per_epoch=int(os.environ.get("TRAIN_STEPS", 8)))
        {TRAINED}
        """
    },
    sites={
        "map@train.py:10.num_parallel_calls": 2,
        "batch@train.py:11.batch_size": 8,
        "prefetch@train.py:21.buffer_size": 0,
    },
    rewritten=(
        "+    ds = ds.map(lambda i: (tf.fill([4], tf.cast(i, tf.float32)), tf.zeros([1])), "
        "tf.data.AUTOTUNE)\n",
        "+model.fit(get_dataset().prefetch(tf.data.AUTOTUNE).with_options(options), ",
    ),
    trained=2,  # two epochs of one step
)

COMPAT_V1 = Shape(
    files={
        "train.py": f"""
        import os
        from pathlib import Path

        import keras
        import tensorflow as tf

        v1 = tf.compat.v1


        def loader():
            ds = v1.data.Dataset.from_tensor_slices(tf.range(64, dtype=tf.float32))
            ds = ds.shuffle(16).map(lambda x: (tf.fill([4], x), x[None]), num_parallel_calls=2)
            return ds.batch(8).prefetch(1)


        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss="mse")
        model.fit(loader(), epochs=1, steps_per_epoch=int(os.environ.get("TRAIN_STEPS", 8)))
        {TRAINED}
        """
    },
    sites={
        "shuffle@train.py:12.buffer_size": 16,
        "map@train.py:12.num_parallel_calls": 2,
        "batch@train.py:13.batch_size": 8,
        "prefetch@train.py:13.buffer_size": 1,
    },
    rewritten=(
        "+    ds = ds.shuffle(16).map(lambda x: (tf.fill([4], x), x[None]), "
        "num_parallel_calls=tf.data.AUTOTUNE)\n",
        "+    return ds.batch(8).prefetch(tf.data.AUTOTUNE)\n",
        "+model.fit(loader().with_options(options), ",
    ),
)

SHAPES = {
    "validation-data": VALIDATION,
    "helper-module": HELPER_MODULE,
    "class": CLASS,
    "tf-keras": TF_KERAS,
    "keras": KERAS,
    "argparse": ARGPARSE,
    "absl-flags": ABSL_FLAGS,
    "strategy-scope": STRATEGY_SCOPE,
    "own-make_model-and-top-level-fit": OWN_HELPERS,
    "tf-compat-v1-loader": COMPAT_V1,
}


def write(folder: Path, files: Mapping[str, str]) -> None:
    folder.mkdir(parents=True)
    for name, source in files.items():
        (folder / name).write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")


#: The sites `chosen` sets to AUTOTUNE (structure edits, such as a cache, stay as written).
TO_AUTOTUNE = {("map", "num_parallel_calls"), ("prefetch", "buffer_size")}


def chosen(discovery: Discovery, precision: str | None) -> dict[str, object]:
    """A configuration that changes each kind of edit: every parallelism and prefetch site to
    AUTOTUNE (an added prefetch included), a private thread pool, and the precision."""
    sites = {
        site.name: AUTOTUNE if (site.method, site.argument) in TO_AUTOTUNE else site.value
        for site in discovery.sites
    }
    knobs: dict[str, object] = {"sites": sites, "private_threadpool_size": 2}
    if precision is not None:
        knobs["mixed_precision"] = precision
    return knobs


def apply(diff: str, original: Path, into: Path, command: list[str]) -> None:
    shutil.copytree(original, into, ignore=shutil.ignore_patterns("__pycache__", "trained"))
    subprocess.run(command, input=diff, text=True, cwd=into, check=True, capture_output=True)


def same_files(left: Path, right: Path) -> bool:
    names = sorted(path.name for path in left.glob("*.py"))
    _, mismatch, errors = filecmp.cmpfiles(left, right, names, shallow=False)
    return (mismatch, errors) == ([], [])


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_a_script_shape_is_found_patched_applied_and_trains_one_step(tmp_path, shape):
    original = tmp_path / "original"
    write(original, shape.files)

    pipeline = load_pipeline(original / "train.py", shape.argv)
    assert pipeline.kind is PipelineKind.SCRIPT
    discovery = discover_sites(pipeline)
    assert not (original / "trained").exists()  # run up to fit: nothing trained
    found = discovery.values()
    assert {name: found.get(name, "absent") for name in shape.sites} == shape.sites
    assert {site.name for site in discovery.sites if site.calls} <= set(shape.sites)
    assert unplaceable(original, discovery, script=True) == {}

    before = pipeline.with_discovery(discovery).baseline.to_dict()
    patch = patch_for(
        original, discovery, before, {**before, **chosen(discovery, shape.precision)}, script=True
    )
    assert patch.manual == ()
    for line in shape.rewritten:
        assert line in patch.diff

    apply(patch.diff, original, tmp_path / "patch", ["patch", "-p0", "--quiet"])
    subprocess.run(
        ["git", "apply", "--check"], input=patch.diff, text=True, cwd=original, check=True
    )
    apply(patch.diff, original, tmp_path / "git", ["git", "apply"])
    assert same_files(tmp_path / "patch", tmp_path / "git")

    ran = subprocess.run(
        [sys.executable, "train.py", *(shape.run_argv or shape.argv)],
        cwd=tmp_path / "patch",
        env={**os.environ, "TRAIN_STEPS": "1"},
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert (tmp_path / "patch" / "trained").read_text() == str(shape.trained)
