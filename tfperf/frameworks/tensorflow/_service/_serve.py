"""A process tfperf starts for tf.data service: `python -m ...._service._serve ROLE REQUEST`.

Roles (REQUEST is a JSON object):

- `worker` `{"dispatcher": "localhost:P", "cores": [0]}`: a `WorkerServer` pinned to `cores`;
- `rate` `{"pipeline": ..., "argv": [...], "knobs": {...}, "cores": [0, 1], "seconds": 1.0,
  "warmup_s": 0.5}`: the pipeline up to the cut, read alone in this process pinned to
  `cores`, its rate written back.

The process pins itself before TensorFlow starts a thread, so every thread it ever runs stays
on `cores`. It answers on stdout with one line starting with `ANSWER_PREFIX` (a JSON object:
`{"ready": true, "address": ...}`, a rate, or `{"error": ...}` before exiting with status 1);
any other line (the user's `print`) is ignored by the parent. A server then runs until its
stdin closes: the parent closes it to stop it, and a parent that dies closes it too, so no
server outlives tfperf.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["ANSWER_PREFIX", "main"]

ANSWER_PREFIX = "tfperf-service: "
#: How often a worker reports to the dispatcher: short, so a new worker is used within ~0.2 s.
HEARTBEAT_MS = 200


def main(argv: Sequence[str]) -> int:
    role, request = argv[0], json.loads(argv[1])
    cores = request.get("cores")
    if cores:
        os.sched_setaffinity(0, cores)  # before TensorFlow starts its threads
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        if role == "rate":
            _answer(_rate(request))
            return 0
        server = _worker(request)
    except Exception as error:
        _answer({"error": f"{type(error).__name__}: {error}"})
        return 1
    _answer({"ready": True, "address": server})
    sys.stdin.read()  # until the parent closes our stdin, or dies
    return 0


def _answer(message: dict[str, Any]) -> None:
    sys.__stdout__.write(ANSWER_PREFIX + json.dumps(message) + "\n")  # type: ignore[union-attr]
    sys.__stdout__.flush()  # type: ignore[union-attr]


def _worker(request: dict[str, Any]) -> str:
    import tensorflow as tf

    service = tf.data.experimental.service
    config = service.WorkerConfig(
        dispatcher_address=request["dispatcher"], port=0, heartbeat_interval_ms=HEARTBEAT_MS
    )
    _KEEP.append(service.WorkerServer(config))
    return str(request["dispatcher"])


_KEEP: list[Any] = []  # the server lives as long as the process


def _rate(request: dict[str, Any]) -> dict[str, Any]:
    from tfperf.frameworks.tensorflow._build import raw_dataset
    from tfperf.frameworks.tensorflow._service._cut import cut_dataset
    from tfperf.frameworks.tensorflow._service._reading import read_rate
    from tfperf.knobs import Knobs
    from tfperf.pipeline import load_pipeline

    pipeline = load_pipeline(request["pipeline"], tuple(request.get("argv", ())))
    knobs = Knobs.from_mapping(request["knobs"])
    dataset, _ = raw_dataset(pipeline, knobs)
    cut = cut_dataset(dataset).dataset.repeat()
    rate = read_rate(cut, seconds=request["seconds"], warmup_s=request["warmup_s"])
    return {"examples_per_sec": rate.examples_per_sec, "batches_per_sec": rate.batches_per_sec}


if __name__ == "__main__":
    status = main(sys.argv[1:])
    sys.stdout.flush()
    os._exit(status)  # no interpreter teardown: TensorFlow's takes seconds
