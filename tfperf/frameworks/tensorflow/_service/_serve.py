"""A process tfperf starts for tf.data service: `python -m ...._service._serve ROLE REQUEST`.

Each child first imports TensorFlow and answers `{"imported": true}`, then waits for one JSON
line on stdin, so tfperf starts every child at once (their imports overlap) and measures only
once all are idle:

- `rate` (REQUEST `{"cores": [0, 1]}`): on `{"pipeline": ..., "argv": [...], "knobs": {...},
  "seconds": 1.0, "warmup_s": 0.5}` it pins every thread it has to `cores`, reads the
  pipeline up to the cut alone and answers its rate, then exits;
- `worker` (REQUEST `{}`): on `{"dispatcher": "localhost:P", "cores": [0]}` it pins every
  thread it has to `cores`, starts a `WorkerServer` and answers `{"ready": true}`. Before
  that it may take rate commands (with their `"cores"`), answered as a `rate` child's are, so
  the first worker measures the one-core rate and then serves on as many cores.

Both pin the same way, after the import and before TensorFlow sizes its thread pools (at the
first op), so the pinned measurement runs the pipeline as a worker of as many cores does.

Answers are lines on stdout starting with `ANSWER_PREFIX` (`{"error": ...}` before exiting
with status 1 on a failure); any other line (the user's `print`) is ignored by the parent. A
worker then runs until its stdin closes: the parent closes it to stop it, and a parent that
dies closes it too, so no server outlives tfperf.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ANSWER_PREFIX = "tfperf-service: "
#: How often a worker reports to the dispatcher: short, so a new worker is used within ~0.2 s.
HEARTBEAT_MS = 200


def main(argv: Sequence[str]) -> int:
    role, request = argv[0], json.loads(argv[1])
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        import tensorflow  # noqa: F401  # the slow part, done while the parent waits

        _answer({"imported": True})
        line = sys.stdin.readline()
        if not line:
            return 0  # the parent stopped us before the command
        command = json.loads(line)
        if role == "rate":
            pin_every_thread(request["cores"])
            _answer(_rate(command))
            return 0
        while "pipeline" in command:  # a worker may measure a pinned rate before it serves
            pin_every_thread(command["cores"])
            _answer(_rate(command))
            line = sys.stdin.readline()
            if not line:
                return 0
            command = json.loads(line)
        _worker(command)
    except Exception as error:
        _answer({"error": f"{type(error).__name__}: {error}"})
        return 1
    _answer({"ready": True})
    sys.stdin.read()  # until the parent closes our stdin, or dies
    return 0


def _answer(message: dict[str, Any]) -> None:
    sys.__stdout__.write(ANSWER_PREFIX + json.dumps(message) + "\n")  # type: ignore[union-attr]
    sys.__stdout__.flush()  # type: ignore[union-attr]


def pin_every_thread(cores: Sequence[int]) -> None:
    """Pins each thread of this process (not only the calling one) to `cores` (Linux)."""
    for task in Path("/proc/self/task").iterdir():
        os.sched_setaffinity(int(task.name), cores)


def _worker(command: dict[str, Any]) -> None:
    import tensorflow as tf

    pin_every_thread(command["cores"])
    service = tf.data.experimental.service
    config = service.WorkerConfig(
        dispatcher_address=command["dispatcher"], port=0, heartbeat_interval_ms=HEARTBEAT_MS
    )
    _KEEP.append(service.WorkerServer(config))


_KEEP: list[Any] = []  # the server lives as long as the process


def _rate(command: dict[str, Any]) -> dict[str, Any]:
    from tfperf.frameworks.tensorflow import _tf
    from tfperf.frameworks.tensorflow._build import raw_dataset
    from tfperf.frameworks.tensorflow._service._cut import cut_dataset
    from tfperf.frameworks.tensorflow._service._reading import read_rate
    from tfperf.knobs import Knobs
    from tfperf.pipeline import load_pipeline

    pipeline = load_pipeline(command["pipeline"], tuple(command.get("argv", ())))
    knobs = Knobs.from_mapping(command["knobs"])
    dataset, _ = raw_dataset(pipeline, knobs)
    dataset = _tf.apply_options(dataset, knobs)
    cut = cut_dataset(dataset).dataset.repeat()
    rate = read_rate(cut, seconds=command["seconds"], warmup_s=command["warmup_s"])
    return {"examples_per_sec": rate.examples_per_sec, "batches_per_sec": rate.batches_per_sec}


if __name__ == "__main__":
    status = main(sys.argv[1:])
    sys.stdout.flush()
    os._exit(status)  # no interpreter teardown: TensorFlow's takes seconds
