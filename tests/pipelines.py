"""Source text of small pipeline files shared by several test modules.

Tests import pipelines from here, never from another test module, so each test module can
change on its own.
"""

# No TensorFlow at all: for a fake trial runner, which never builds the dataset. Fixes every knob
# but num_parallel_calls and prefetch, so a few trials explore the space.
TUNER_SOURCE = """
BASELINE = {"batch_size": 8, "num_parallel_calls": 1, "prefetch": 0}
SEARCH_SPACE = {"batch_size": 8, "shuffle_buffer": 1024, "mixed_precision": "float32"}
def make_dataset(knobs): pass
def make_train_step(knobs): pass
"""

# Every batch takes >= 20 ms to produce in a sequential map, with no prefetch; the model is a
# single tiny Dense layer (well under 1 ms a step). Waiting dominates by a wide margin.
INPUT_BOUND = """
import time
import keras
import numpy as np
import tensorflow as tf

BASELINE = {"batch_size": 16, "num_parallel_calls": 1, "prefetch": 0}

def _slow(x):
    time.sleep(0.02)
    return x

def make_dataset(knobs):
    features = np.random.default_rng(0).normal(size=(400, 8)).astype("float32")
    labels = np.zeros((400, 1), "float32")
    ds = tf.data.Dataset.from_tensor_slices((features, labels)).batch(knobs.batch_size)
    ds = ds.map(lambda x, y: (tf.numpy_function(_slow, [x], tf.float32, stateful=False), y),
                num_parallel_calls=knobs.num_parallel_calls)
    ds = ds.map(lambda x, y: (tf.ensure_shape(x, [None, 8]), y))
    return ds.prefetch(knobs.prefetch) if knobs.prefetch else ds

def make_model(knobs):
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    return model
"""

# Input is one cached in-memory batch, prefetched; the model does ~100 MFLOP a step.
COMPUTE_BOUND = """
import keras
import numpy as np
import tensorflow as tf

BASELINE = {"batch_size": 256, "prefetch": 2}

def make_dataset(knobs):
    x = np.ones((knobs.batch_size, 256), "float32")
    y = np.zeros((knobs.batch_size, 1), "float32")
    ds = tf.data.Dataset.from_tensors((x, y)).cache().repeat(50)
    return ds.prefetch(knobs.prefetch)

def make_model(knobs):
    model = keras.Sequential(
        [keras.Input((256,))]
        + [keras.layers.Dense(1024, activation="relu") for _ in range(3)]
        + [keras.layers.Dense(1)]
    )
    model.compile(optimizer="adam", loss="mse")
    return model
"""

# A plain train step instead of a model; records the precision policy it saw.
TRAIN_STEP = """
import keras
import tensorflow as tf

SEEN = {}
BASELINE = {"batch_size": 4, "mixed_precision": "mixed_bfloat16"}

def make_dataset(knobs):
    return tf.data.Dataset.range(12).batch(knobs.batch_size)

def make_train_step(knobs):
    SEEN["policy"] = keras.mixed_precision.global_policy().name
    total = tf.Variable(0, dtype=tf.int64)

    @tf.function
    def step(batch):
        total.assign_add(tf.reduce_sum(batch))
        return total

    return step
"""

# Each element waits 10 ms as if on slow storage (the sleep releases the GIL, so parallel map
# calls overlap). Throughput grows with num_parallel_calls up to the size of tf.data's shared
# thread pool, one thread per core: about 2x on a 2-core machine. Everything else is fixed so
# that a handful of trials explores the knob that matters.
PARALLEL_SENSITIVE = """
import time
import tensorflow as tf

BASELINE = {"batch_size": 8, "num_parallel_calls": 1, "prefetch": 0}
SEARCH_SPACE = {
    "num_parallel_calls": [1, 2, 8, "AUTOTUNE"],
    "prefetch": [0, 2],
    "batch_size": 8, "shuffle_buffer": 1024, "cycle_length": 1, "num_parallel_reads": 1,
    "mixed_precision": "float32", "deterministic": None, "private_threadpool_size": None,
}

def _fetch(x):
    time.sleep(0.01)
    return x

def make_dataset(knobs):
    ds = tf.data.Dataset.range(64).map(
        lambda i: tf.numpy_function(_fetch, [tf.cast(i, tf.float32)], tf.float32, stateful=False),
        num_parallel_calls=knobs.num_parallel_calls,
    )
    ds = ds.map(lambda x: tf.reshape(x, [1])).batch(knobs.batch_size)
    return ds.prefetch(knobs.prefetch) if knobs.prefetch else ds

def make_train_step(knobs):
    return lambda batch: tf.reduce_sum(batch)
"""

# An interleave with a literal cycle_length=2 and its parallel calls set by a knob (the shape of
# Model Garden's ResNet input, cycle_length=10): tf.data refuses num_parallel_calls above 2. A
# map after it shares the knob, so the model sizes it for the cores. Nothing is slow.
LITERAL_CYCLE = """
import tensorflow as tf

BASELINE = {"batch_size": 8, "num_parallel_calls": 1, "prefetch": 0}
SEARCH_SPACE = {
    "prefetch": [0, 2],
    "batch_size": 8, "shuffle_buffer": 1024, "cycle_length": 1, "num_parallel_reads": 1,
    "mixed_precision": "float32", "deterministic": None, "private_threadpool_size": None,
}

def make_dataset(knobs):
    shards = tf.data.Dataset.range(4)
    ds = shards.interleave(
        lambda shard: tf.data.Dataset.range(64).map(lambda x: x + 64 * shard),
        cycle_length=2,
        num_parallel_calls=knobs.num_parallel_calls,
    )
    ds = ds.map(
        lambda x: tf.reshape(tf.cast(x, tf.float32), [1]),
        num_parallel_calls=knobs.num_parallel_calls,
    ).batch(knobs.batch_size)
    return ds.prefetch(knobs.prefetch) if knobs.prefetch else ds

def make_train_step(knobs):
    return lambda batch: tf.reduce_sum(batch)
"""

# The input alone, for an emulated step (`--step-time`): no model. A sequential map sleeps 5 ms
# per batch in Python, so a batch comes every ~5 ms (more on a busy host); prefetch(1) lets the
# input work while the emulated step sleeps.
INPUT_ONLY_5MS = """
import time
import numpy as np
import tensorflow as tf

BASELINE = {"batch_size": 8, "num_parallel_calls": 1, "prefetch": 1}

def _slow(x):
    time.sleep(0.005)
    return x

def make_dataset(knobs):
    ds = tf.data.Dataset.from_tensor_slices(np.zeros((64, 4), "float32")).batch(knobs.batch_size)
    ds = ds.map(
        lambda b: tf.py_function(_slow, [b], tf.float32),
        num_parallel_calls=knobs.num_parallel_calls,
    )
    return ds.repeat().prefetch(knobs.prefetch)
"""
