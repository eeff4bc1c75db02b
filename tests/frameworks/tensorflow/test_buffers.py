"""Host memory by buffer, read from real pipelines: elements held x bytes per element."""

from __future__ import annotations

import pytest

from tfperf.frameworks.tensorflow._buffers import buffer_holds
from tfperf.frameworks.tensorflow._chain import recover_stages
from tfperf.results.stages import BufferKind, SizeSource, memory_account

tf = pytest.importorskip("tensorflow")

MIB = 2**20


def _encoded_images(count: int) -> list[bytes]:
    """Small PNGs of 128x128 RGB: 48 KiB of uint8 decoded, 192 KiB as float32."""
    image = tf.zeros([128, 128, 3], tf.uint8)
    return [tf.io.encode_png(image + i).numpy() for i in range(count)]


def _decode(encoded):
    image = tf.io.decode_png(encoded, channels=3)  # shape [None, None, 3]: sizes vary
    return tf.cast(image, tf.float32) / 255.0


def test_a_shuffle_of_decoded_images_holds_what_it_holds_and_the_advice_follows():
    records = tf.data.Dataset.from_tensor_slices(_encoded_images(4)).repeat(300)
    dataset = records.map(_decode).shuffle(1024).batch(8).prefetch(2)
    holds = {hold.stage: hold for hold in buffer_holds(recover_stages(dataset), None, 2)}
    shuffle = holds["shuffle(1024)"]
    assert shuffle.kind is BufferKind.SHUFFLE
    assert shuffle.size_source is SizeSource.MEASURED
    assert shuffle.bytes == pytest.approx(192 * MIB, rel=0.25)
    assert shuffle.enlarged_by == "map(_decode)"
    assert holds["prefetch(2)"].bytes == pytest.approx(2 * 8 * 192 * 1024, rel=0.25)

    account = memory_account(list(holds.values()), peak_rss_bytes=None, ram_budget_bytes=None)
    assert account.total_bytes == pytest.approx(195 * MIB, rel=0.25)
    advice = " ".join(account.advice)
    assert "shuffle(1024) holds 192 MiB" in advice
    assert "shuffle the file names or the records before decoding" in advice


def test_a_cast_to_float_names_its_map_and_a_file_cache_holds_nothing(tmp_path):
    pixels = tf.data.Dataset.from_tensors(tf.zeros([64, 64, 3], tf.uint8)).repeat(16)
    floats = pixels.map(lambda x: tf.cast(x, tf.float32), num_parallel_calls=4)
    dataset = floats.cache(str(tmp_path / "cache")).batch(4).prefetch(tf.data.AUTOTUNE)
    holds = {hold.stage: hold for hold in buffer_holds(recover_stages(dataset), None, 2)}
    assert set(holds) == {"map(lambda)", "prefetch(AUTOTUNE)"}
    assert holds["map(lambda)"].elements == 4
    assert holds["map(lambda)"].size_source is SizeSource.SPEC
    assert holds["prefetch(AUTOTUNE)"].cast_by == "map(lambda)"
    assert "counted as 1" in (holds["prefetch(AUTOTUNE)"].note or "")
    in_memory = floats.cache()
    (cache,) = [
        h for h in buffer_holds(recover_stages(in_memory), None, 2) if h.kind is BufferKind.CACHE
    ]
    assert cache.bytes == 16 * 64 * 64 * 3 * 4


def test_a_padded_batch_holds_the_batch_it_builds_measured_where_lengths_vary():
    lengths = tf.data.Dataset.range(1, 9).map(lambda n: tf.zeros([n * 16], tf.float32))
    dataset = lengths.padded_batch(4)
    (hold,) = buffer_holds(recover_stages(dataset), None, 2)
    assert (hold.stage, hold.kind, hold.elements) == ("padded_batch(4)", BufferKind.PADDED_BATCH, 1)
    assert hold.size_source is SizeSource.MEASURED
    assert hold.bytes == pytest.approx(4 * 128 * 4, rel=0.25)
