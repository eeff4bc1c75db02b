"""`tfperf offload` end to end on a real local tf.data service, and a real SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time

import psutil
import pytest

from tests.cli.console import TFPERF
from tfperf.cli.main import EXIT_USAGE, main
from tfperf.cli.offload import EXIT_SERVICE

pytestmark = pytest.mark.tf


# A few milliseconds of real TensorFlow work per batch; the step does nothing.
SMALL = """
import tensorflow as tf

BASELINE = {"batch_size": 8, "num_parallel_calls": 1, "prefetch": 2}

def make_dataset(knobs):
    ds = tf.data.Dataset.range(100000).map(
        lambda x: tf.reduce_sum(tf.random.stateless_uniform([64, 64], seed=[x, 0])),
        num_parallel_calls=knobs.num_parallel_calls,
    )
    return ds.batch(knobs.batch_size).prefetch(knobs.prefetch)

def make_train_step(knobs):
    return lambda batch: batch
"""

CALLS_PYTHON = """
import tensorflow as tf

BASELINE = {"batch_size": 8}

def _double(x):
    return x * 2

def make_dataset(knobs):
    ds = tf.data.Dataset.range(100)
    ds = ds.map(lambda x: tf.py_function(_double, [x], tf.int64))
    return ds.batch(knobs.batch_size)

def make_train_step(knobs):
    return lambda batch: batch
"""


def _serve_children(pid: int) -> list[psutil.Process]:
    found = []
    for child in psutil.Process(pid).children(recursive=True):
        try:
            if "_service._serve" in " ".join(child.cmdline()):
                found.append(child)
        except psutil.Error:
            continue
    return found


def test_offload_end_to_end_keeps_what_it_measured_when_a_worker_dies(
    capsys, monkeypatch, write_pipeline, tmp_path
):
    """One run covers the whole command on real processes (a pinned measurement, two worker
    processes, a dispatcher here) and the fault: worker 2 is killed during the verify with
    two workers, so the run ends with exit status 3 and keeps every figure before it."""
    from tfperf.frameworks.tensorflow._service import _offload

    measure = _offload.through_service
    killed: list[int] = []

    def kill_the_second_worker(cluster, dataset, compression, settings, what):  # type: ignore[no-untyped-def]
        if "2 worker(s)" in what:
            killed.append(cluster.workers[-1].process.pid)
            # At once, not on a timer: a timer that fires after the window ends (a loaded
            # machine) leaves a run with no fault to keep.
            os.kill(killed[0], signal.SIGKILL)
        return measure(cluster, dataset, compression, settings, what)

    monkeypatch.setattr(_offload, "through_service", kill_the_second_worker)
    path = write_pipeline(SMALL)
    outputs = ["--json", str(tmp_path / "o.json"), "--html", str(tmp_path / "o.html")]
    limits = ["--max-cores", "1", "--max-workers", "2", "--seconds", "0.3", "--quiet"]
    model = ["--model-examples-per-sec", "1e7"]
    status = main(["offload", str(path), *limits, *model, *outputs])
    out, err = capsys.readouterr()
    assert status == EXIT_SERVICE, err
    assert f"tf.data service worker 2 (cores 1) (pid {killed[0]}) died: killed by signal 9 " in err
    assert "during the verify with 2 worker(s)" in err
    data = json.loads((tmp_path / "o.json").read_text())
    assert data["cut"] == "batch(8)" and data["cores_per_worker"] == 1
    assert [rate["cores"] for rate in data["core_rates"]] == [1]
    assert {c["compression"] for c in data["ceilings"]} == {"AUTO", "NONE"}
    assert [point["workers"] for point in data["verify"]] == [1]
    assert data["per_worker_examples_per_sec"] > 0 and data["workers_needed"] >= 1
    assert data["binds"] in ("workers", "trainer") and "killed by signal 9" in data["fault"]
    assert "tf.data service worker(s) of 1 core(s) feed the model" in out
    assert "How many tf.data service workers" in (tmp_path / "o.html").read_text()
    assert _serve_children(os.getpid()) == []


def test_a_worker_killed_while_it_starts_ends_offload_saying_it_died(
    capsys, monkeypatch, write_pipeline, tmp_path
):
    """Issue 54: the error path read the worker's log after closing it ("internal error:
    ValueError: seek of closed file"). Now: exit 3, one message that says the worker died."""
    from tfperf.frameworks.tensorflow._service import _offload

    spawn = _offload.spawn_workers

    def spawn_and_kill(count: int, first: int = 1):  # type: ignore[no-untyped-def]
        children = spawn(count, first)
        os.kill(children[0].process.pid, signal.SIGKILL)
        return children

    monkeypatch.setattr(_offload, "spawn_workers", spawn_and_kill)
    outputs = ["--json", str(tmp_path / "o.json"), "--html", str(tmp_path / "o.html")]
    limits = ["--max-cores", "1", "--max-workers", "1", "--quiet"]
    path = write_pipeline(SMALL)
    status = main(["offload", str(path), *limits, "--model-examples-per-sec", "1e7", *outputs])
    err = capsys.readouterr().err
    assert status == EXIT_SERVICE, err
    assert "tf.data service worker 1 (pid " in err and ") died: killed by signal 9" in err, err
    assert "internal error" not in err and "Traceback" not in err, err
    assert err.count("tfperf: error:") == 1, err
    assert _serve_children(os.getpid()) == []


@pytest.mark.parametrize(
    ("flag", "value", "words"),
    [
        ("--port", "70000", "a TCP port from 1 to 65535"),
        ("--network-gbps", "nan", "a bandwidth in Gb/s above 0"),
        ("--network-gbps", "0", "a bandwidth in Gb/s above 0"),
        ("--network-gbps", "inf", "a bandwidth in Gb/s above 0"),
        ("--model-examples-per-sec", "nan", "a rate in examples/s above 0"),
    ],
)
def test_an_impossible_number_is_refused_by_the_parser(capsys, flag, value, words):
    """Issue 54: `--port 70000` was "internal error: OverflowError", `--network-gbps nan`
    wrote NaN into the JSON, and `--network-gbps 0` was refused in seconds."""
    with pytest.raises(SystemExit) as stopped:
        main(["offload", "p.py", flag, value])
    said = capsys.readouterr().err.strip().splitlines()[-1]
    assert stopped.value.code == EXIT_USAGE
    assert f"argument {flag}: must be {words}" in said and value in said, said
    assert "seconds" not in said


def test_a_stage_the_service_cannot_run_stops_offload_before_measuring(capsys, write_pipeline):
    status = main(["offload", str(write_pipeline(CALLS_PYTHON)), "--quiet"])
    err = capsys.readouterr().err
    assert status == EXIT_USAGE
    assert "pipeline.py: the stage map(lambda) at pipeline.py:10 calls Python" in err
    assert _serve_children(os.getpid()) == []


def test_a_port_in_use_stops_offload_before_any_process_starts(capsys, write_pipeline):
    with socket.socket() as holder:
        holder.bind(("localhost", 0))
        holder.listen()
        port = holder.getsockname()[1]
        status = main(["offload", str(write_pipeline(SMALL)), "--port", str(port), "--quiet"])
    err = capsys.readouterr().err
    assert status == EXIT_SERVICE, err
    assert f"cannot start a tf.data service dispatcher on port {port}" in err
    assert _serve_children(os.getpid()) == []


def test_sigterm_stops_offload_and_every_process_it_started(write_pipeline, tmp_path):
    path = write_pipeline(SMALL)
    process = subprocess.Popen(
        [TFPERF, "offload", str(path), "--quiet", "--model-examples-per-sec", "1e7"],
        cwd=tmp_path,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        started: list[psutil.Process] = []
        while not started and time.monotonic() < deadline:
            assert process.poll() is None, process.communicate()
            started = _serve_children(process.pid)
            time.sleep(0.1)
        assert started, "offload started no child"
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    except BaseException:
        for child in psutil.Process(process.pid).children(recursive=True):
            child.kill()
        process.kill()
        raise
    assert process.returncode == 143, err
    assert "tfperf: terminated (SIGTERM)." in err
    assert [child for child in started if child.is_running() and child.status() != "zombie"] == []


def test_result_json_never_holds_nan():
    """Issue 54: NaN reached the JSON, which strict parsers (jq, JSON.parse) reject."""
    from tfperf.outputs import json_text

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in the JSON")

    text = json_text({"gbps": float("nan"), "rates": [1.5, float("inf")], "name": "x"})
    assert json.loads(text, parse_constant=refuse) == {
        "gbps": None,
        "rates": [1.5, None],
        "name": "x",
    }
