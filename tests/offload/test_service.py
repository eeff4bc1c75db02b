"""tf.data service under tfperf, on real servers over loopback, all in this process (one
cluster for the module; worker processes are in tests/cli/test_offload.py), and the faults: a
dispatcher that goes away or is not there, a port in use, a stage a worker cannot run."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

tf = pytest.importorskip("tensorflow")

from tfperf.errors import PipelineFileError, ServiceError  # noqa: E402
from tfperf.frameworks.tensorflow._service import (  # noqa: E402
    LocalCluster,
    check_reachable,
    check_runs_on_service,
    cut_dataset,
    start_dispatcher,
)
from tfperf.frameworks.tensorflow._service._measure import (  # noqa: E402
    batch_bytes,
    service_ceiling,
    through_service,
)
from tfperf.frameworks.tensorflow._service._reading import read_watched  # noqa: E402
from tfperf.offload import OffloadSettings  # noqa: E402

SETTINGS = OffloadSettings(seconds=0.2, warmup_s=0.1, timeout_s=20.0)


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    service = tf.data.experimental.service
    with LocalCluster.start() as running:
        config = service.WorkerConfig(
            dispatcher_address=running.dispatcher.address, heartbeat_interval_ms=200
        )
        worker = service.WorkerServer(config)
        yield running
        worker.stop()


def _pipeline() -> tf.data.Dataset:
    return tf.data.Dataset.range(1000).map(lambda x: x * 2).batch(8).prefetch(2)


def test_the_cut_drops_the_trailing_prefetch() -> None:
    cut = cut_dataset(_pipeline())
    assert cut.label == "batch(8)"
    assert cut.dataset.element_spec.shape.as_list() == [None]


def test_the_pipeline_and_a_cached_batch_read_through_the_service(cluster: LocalCluster) -> None:
    rate = through_service(cluster, cut_dataset(_pipeline()).dataset, "AUTO", SETTINGS, "a test")
    assert rate.batches > 0 and rate.examples == 8 * rate.batches
    batch = next(iter(_pipeline()))
    ceiling = service_ceiling(cluster, batch, "NONE", SETTINGS)
    assert ceiling.compression == "NONE" and ceiling.examples_per_sec > 0


def test_a_batch_is_counted_raw_and_compressed() -> None:
    raw, compressed = batch_bytes((tf.zeros([64, 256]), tf.constant([b"ab", b"cde"])))
    assert raw == 64 * 256 * 4 + 5
    assert compressed < raw / 10  # zeros compress


def test_a_stage_a_worker_cannot_run_is_named_with_its_line_and_fix() -> None:
    def slow(x: object) -> object:
        return x

    calls_python = (
        tf.data.Dataset.range(4).map(lambda x: tf.py_function(slow, [x], tf.int64)).batch(2)
    )
    with pytest.raises(PipelineFileError) as raised:
        check_runs_on_service(calls_python, "pipeline.py")
    message = str(raised.value)
    assert "pipeline.py: the stage map(lambda) at test_service.py:" in message
    assert "calls Python for each element" in message and "TensorFlow ops" in message
    generated = tf.data.Dataset.from_generator(
        lambda: iter([1, 2]), output_signature=tf.TensorSpec([], tf.int64)
    )
    with pytest.raises(PipelineFileError, match=r"from_generator\(lambda\).*Python generator"):
        check_runs_on_service(generated, "pipeline.py")


def test_a_resource_only_this_process_holds_is_named_and_a_variable_runs(
    cluster: LocalCluster,
) -> None:
    """A worker cannot find an iterator or queue created in the trainer's process; it rebuilds
    a variable and a lookup table from the graph, so those run through the service."""
    queue = tf.queue.FIFOQueue(4, tf.int64)
    uses_queue = tf.data.Dataset.range(8).take(6).map(lambda x: x + queue.dequeue())
    with pytest.raises(PipelineFileError) as raised:
        check_runs_on_service(uses_queue.batch(2).prefetch(1), "pipeline.py")
    message = str(raised.value)
    assert "pipeline.py: the stage map(lambda) at test_service.py:" in message
    assert "uses a QueueInterface created in this process" in message
    assert "after `distribute()`" in message
    variable = tf.Variable(3, dtype=tf.int64)
    keys = tf.constant([1, 2], tf.int64)
    table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(keys, keys * 10), -1)
    rebuilt = tf.data.Dataset.range(1000).map(lambda x: table.lookup(x) * variable).batch(8)
    check_runs_on_service(rebuilt, "pipeline.py")
    rate = through_service(cluster, rebuilt, "AUTO", SETTINGS, "a test")
    assert rate.batches > 0


def test_a_dispatcher_that_is_not_there_is_named_at_once() -> None:
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        port = probe.getsockname()[1]  # free once the probe closes, and nobody listens
    started = time.monotonic()
    with pytest.raises(
        ServiceError, match=f"no tf.data service dispatcher answers at localhost:{port}"
    ):
        check_reachable(f"localhost:{port}", timeout_s=2.0)
    assert time.monotonic() - started < 2.5


def test_a_port_in_use_is_named_with_the_fix() -> None:
    with socket.socket() as holder:
        holder.bind(("localhost", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(ServiceError, match=f"on port {port}: .*pick another with --port"):
            start_dispatcher(port)


def test_a_read_that_gets_no_batch_stops_within_its_bound() -> None:
    """The dispatcher stops and no worker ever served: the watched read gives up after its
    timeout instead of waiting inside TensorFlow for ever."""
    dispatcher = start_dispatcher()
    dataset = (
        tf.data.Dataset.range(10)
        .repeat()
        .batch(2)
        .apply(tf.data.experimental.service.distribute("parallel_epochs", dispatcher.target))
    )
    threading.Timer(0.3, dispatcher.stop).start()
    started = time.monotonic()
    with pytest.raises(ServiceError, match=r"no batch came through the tf\.data service for 1 s"):
        read_watched(
            dataset,
            seconds=60.0,
            warmup_s=0.0,
            timeout_s=1.0,
            fault=lambda: None,
            what="the test read",
        )
    assert time.monotonic() - started < 5.0


def test_no_child_outlives_the_module() -> None:
    import psutil

    assert [
        p for p in psutil.Process().children() if "_service._serve" in " ".join(p.cmdline())
    ] == []
