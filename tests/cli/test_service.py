"""`tfperf profile --service`: through a dispatcher and worker started outside tfperf (here,
in the test's process), and refused at once when the dispatcher is not there."""

from __future__ import annotations

import json
import socket
import threading
import time

import psutil
import pytest

from tfperf.cli.main import EXIT_USAGE, main
from tfperf.cli.offload import EXIT_SERVICE

pytestmark = pytest.mark.tf

SMALL = """
import tensorflow as tf

BASELINE = {"batch_size": 4, "prefetch": 2}

def make_dataset(knobs):
    return tf.data.Dataset.range(64).map(lambda x: x * 2).batch(knobs.batch_size).prefetch(2)

def make_train_step(knobs):
    return lambda batch: batch
"""

GENERATED = """
import tensorflow as tf

BASELINE = {"batch_size": 4}

def _numbers():
    yield from range(64)

def make_dataset(knobs):
    ds = tf.data.Dataset.from_generator(_numbers, output_signature=tf.TensorSpec([], tf.int64))
    return ds.batch(knobs.batch_size)

def make_train_step(knobs):
    return lambda batch: batch
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        return int(probe.getsockname()[1])


def test_profile_measures_through_a_running_service(capsys, write_pipeline, tmp_path):
    import tensorflow as tf

    service = tf.data.experimental.service
    dispatcher = service.DispatchServer(service.DispatcherConfig(port=0))
    address = dispatcher.target.removeprefix("grpc://")
    worker = service.WorkerServer(
        service.WorkerConfig(dispatcher_address=address, heartbeat_interval_ms=200)
    )
    try:
        outputs = ["--json", str(tmp_path / "p.json"), "--html", str(tmp_path / "p.html")]
        window = ["--steps", "5", "--min-seconds", "0", "--quiet", "--debug"]
        path = write_pipeline(SMALL)
        status = main(["profile", str(path), "--service", dispatcher.target, *window, *outputs])
    finally:
        worker.stop()
        dispatcher.stop()
    assert status == 0, capsys.readouterr().err
    knobs = json.loads((tmp_path / "p.json").read_text())["knobs"]
    assert knobs["service"] == f"grpc://{address}"
    assert knobs["service_processing_mode"] == "parallel_epochs"


def test_profile_refuses_a_dispatcher_that_is_not_there(capsys, write_pipeline):
    port = _free_port()
    path = write_pipeline(SMALL)
    status = main(["profile", str(path), "--service", f"grpc://localhost:{port}", "--quiet"])
    err = capsys.readouterr().err
    assert status == EXIT_SERVICE, err
    assert f"no tf.data service dispatcher answers at localhost:{port}" in err


def test_profile_names_a_stage_the_service_cannot_run_before_measuring(capsys, write_pipeline):
    path = write_pipeline(GENERATED)
    status = main(["profile", str(path), "--service", "grpc://localhost:1", "--quiet"])
    err = capsys.readouterr().err
    assert status == EXIT_USAGE, err
    assert (
        "the stage from_generator(_numbers) at pipeline.py:5 reads from a Python generator" in err
    )


def test_an_ipv6_host_without_brackets_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit):
        main(["profile", "p.py", "--service", "grpc://::1:5050"])
    assert "an IPv6 host goes in brackets, e.g. grpc://[::1]:5050" in capsys.readouterr().err


def test_a_malformed_address_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit):
        main(["profile", "p.py", "--service", "localhost"])
    assert "expected a tf.data service dispatcher as grpc://HOST:PORT" in capsys.readouterr().err


def test_tune_refuses_a_dispatcher_that_is_not_there_before_any_trial(
    capsys, write_pipeline, tmp_path
):
    port = _free_port()
    path = write_pipeline(SMALL)
    outputs = ["--json", str(tmp_path / "t.json"), "--html", str(tmp_path / "t.html")]
    storage = ["--storage", f"sqlite:///{tmp_path}/s.db"]
    service = ["--service", f"localhost:{port}"]
    status = main(["tune", str(path), "--trials", "2", "--quiet", *service, *storage, *outputs])
    err = capsys.readouterr().err
    assert status == EXIT_SERVICE, err
    assert f"no tf.data service dispatcher answers at localhost:{port}" in err


def test_a_dispatcher_that_goes_away_during_a_profile_ends_it_with_exit_3(
    capsys, write_pipeline, tmp_path
):
    """The dispatcher answers the check, then stops once the measuring child starts: the
    child's read blocks, the stall guard ends it, and the message says the dispatcher left."""
    import tensorflow as tf

    service = tf.data.experimental.service
    dispatcher = service.DispatchServer(service.DispatcherConfig(port=0))

    def stop_when_the_child_starts() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if any("tfperf.trials._worker" in " ".join(c.cmdline()) for c in _children()):
                break
            time.sleep(0.05)
        dispatcher.stop()

    watcher = threading.Thread(target=stop_when_the_child_starts, daemon=True)
    watcher.start()
    outputs = ["--json", str(tmp_path / "p.json"), "--html", str(tmp_path / "p.html")]
    window = ["--steps", "5", "--stall-timeout", "3", "--quiet"]
    path = write_pipeline(SMALL)
    status = main(["profile", str(path), "--service", dispatcher.target, *window, *outputs])
    watcher.join()
    err = capsys.readouterr().err
    assert status == EXIT_SERVICE, err
    address = dispatcher.target.removeprefix("grpc://")
    assert f"the tf.data service dispatcher at {address} went away during the measurement" in err


def _children() -> list[psutil.Process]:
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            child.cmdline()
        except psutil.Error:
            continue
        found.append(child)
    return found


def test_a_port_that_is_not_a_dispatcher_is_refused_up_front_with_exit_2(capsys, write_pipeline):
    """Issue 54: a server that is not a dispatcher (here a bare TCP listener) used to pass the
    check, stall the measurement for minutes and blame `make_dataset` with exit 1."""
    with socket.socket() as listener:
        listener.bind(("localhost", 0))
        listener.listen()
        port = listener.getsockname()[1]
        path = write_pipeline(SMALL)
        status = main(["profile", str(path), "--service", f"grpc://localhost:{port}", "--quiet"])
    err = capsys.readouterr().err
    assert status == EXIT_USAGE, err
    assert f"--service grpc://localhost:{port}: something listens there, but it is not a " in err
    assert "make_dataset" not in err and "internal error" not in err


def test_an_ipv6_address_in_brackets_reaches_a_live_dispatcher(capsys, write_pipeline, tmp_path):
    """Issue 54: `grpc://[::1]:PORT` was refused with a dispatcher running there."""
    import tensorflow as tf

    service = tf.data.experimental.service
    dispatcher = service.DispatchServer(service.DispatcherConfig(port=0))
    port = dispatcher.target.rpartition(":")[2]
    worker = service.WorkerServer(
        service.WorkerConfig(dispatcher_address=f"localhost:{port}", heartbeat_interval_ms=200)
    )
    try:
        outputs = ["--json", str(tmp_path / "p.json"), "--html", str(tmp_path / "p.html")]
        window = ["--steps", "5", "--min-seconds", "0", "--quiet", "--debug"]
        path = write_pipeline(SMALL)
        target = f"grpc://[::1]:{port}"
        status = main(["profile", str(path), "--service", target, *window, *outputs])
    finally:
        worker.stop()
        dispatcher.stop()
    assert status == 0, capsys.readouterr().err
    assert json.loads((tmp_path / "p.json").read_text())["knobs"]["service"] == target
