"""How long a Python-calling stage's threads wait for the interpreter lock, by thread count.

remote_storage's fetch (`tf.numpy_function`, a 2-4 ms `time.sleep` per object, which releases
the lock as a socket read does) runs alone (the pipeline-only phase's loop) at each thread
count, in a fresh process each, at the bench's tuned shape: batch 128, prefetch 8, a private
pool of as many threads as parallel calls, nondeterministic order. Each fetch is timed from
inside: how much later than asked `time.sleep` returned. Python must take the lock again before
the call can go on, so past the kernel's wake-up that lateness is the wait for the lock.

    python -m benchmarks.lock_wait [--threads 4 16 32 71 128] [--seconds 6] [--json PATH]

Prints the report's section (`benchmarks.lock_wait_record`); `--json PATH` also writes the rows
for `python -m benchmarks`, which runs this module in a child.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.goals import SATURATED
from benchmarks.lock_wait_record import LockWaitRow, lock_wait_section

#: The bench's tuned shape of remote_storage, less the thread count.
SHAPE = {"batch_size": 128, "shuffle_buffer": 1024, "prefetch": 8}
THREADS = (4, 16, 32, 71, 128)
WARMUP_BATCHES = 20


def measure(threads: int, seconds: float) -> LockWaitRow:
    """remote_storage's input alone at `threads`, its fetches' late returns recorded."""
    import numpy as np
    import tensorflow as tf

    import tfperf
    from benchmarks import remote_storage

    late: list[float] = []

    def get(self: remote_storage._ObjectStore, key: int) -> bytes:
        asked = float(self._latency[key])
        started = time.perf_counter()
        time.sleep(asked)
        late.append(time.perf_counter() - started - asked)
        return self._blob[key].tobytes()

    remote_storage._ObjectStore.get = get  # type: ignore[method-assign]
    knobs = tfperf.Knobs.from_mapping({**SHAPE, "num_parallel_calls": threads})
    options = tf.data.Options()
    options.deterministic = False
    options.threading.private_threadpool_size = threads
    batches = iter(remote_storage.make_dataset(knobs).repeat().with_options(options))
    for _ in range(WARMUP_BATCHES):
        next(batches)
    late.clear()
    wall, cpu, count = time.perf_counter(), time.process_time(), 0
    while time.perf_counter() - wall < seconds:
        next(batches)
        count += 1
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return LockWaitRow(
        threads=threads,
        examples_per_sec=count * SHAPE["batch_size"] / wall,
        cpu_percent=100 * cpu / wall,
        late_mean_ms=1000 * float(np.mean(late)),
        late_p90_ms=1000 * float(np.percentile(late, 90)),
    )


def _child(threads: int, seconds: float) -> LockWaitRow:
    """`measure` in a fresh interpreter: each thread count gets a TensorFlow runtime of its own."""
    command = [sys.executable, "-m", "benchmarks.lock_wait", "--child", str(threads), str(seconds)]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-15:])
        raise SystemExit(f"{threads} threads failed (exit status {done.returncode}):\n{tail}")
    return LockWaitRow(**json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.lock_wait", description=__doc__)
    parser.add_argument("--threads", type=int, nargs="+", default=list(THREADS))
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--child", type=float, nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        row = measure(int(args.child[0]), args.child[1])
        print(json.dumps(dataclasses.asdict(row)), flush=True)
        os._exit(0)  # the private pool's threads may hold the interpreter's exit
    rows = [_child(threads, args.seconds) for threads in args.threads]
    if args.json is not None:
        args.json.write_text(json.dumps([dataclasses.asdict(r) for r in rows]), encoding="utf-8")
    cores = os.cpu_count() or 1
    print(lock_wait_section(rows, cores, SATURATED * 100 * cores))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
