"""A TensorFlow script that trains in its own loop, as in the guide "Writing a training loop
from scratch": no `model.fit`, a `tf.function` step with a `GradientTape`, and records that
each wait ~1 ms to arrive (a read from object storage), mapped one at a time as written.

    tfperf profile examples/custom_loop/train.py
    tfperf tune examples/custom_loop/train.py --write-patch -- --epochs 3
"""

import argparse
import time

import keras
import numpy as np
import tensorflow as tf

RECORDS = 2048
FEATURES = 32


def read(index):
    time.sleep(0.001)  # the read: waiting, not computing
    row = np.random.default_rng(int(index)).standard_normal(FEATURES).astype("float32")
    return row, np.int64(row.sum() > 0)


def parse(index):
    features, label = tf.numpy_function(read, [index], (tf.float32, tf.int64))
    return tf.ensure_shape(features, [FEATURES]), tf.ensure_shape(label, [])


parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
args = parser.parse_args()

train_dataset = tf.data.Dataset.range(RECORDS).shuffle(RECORDS).map(parse).batch(32)

model = keras.Sequential(
    [keras.Input((FEATURES,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(2)]
)
optimizer = keras.optimizers.Adam(learning_rate=1e-3)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_weights)
    optimizer.apply_gradients(zip(grads, model.trainable_weights, strict=True))
    return loss


for epoch in range(args.epochs):
    started = time.perf_counter()
    for x_batch, y_batch in train_dataset:
        loss = train_step(x_batch, y_batch)
    seconds = time.perf_counter() - started
    print(f"epoch {epoch}: loss {float(loss):.3f}, {RECORDS / seconds:,.0f} examples/s")
