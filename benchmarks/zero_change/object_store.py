"""The simulated object store of `benchmarks/remote_storage.py`, for its plain-file twin.

The same objects (the same file, `benchmarks/data/remote_storage/objects.npy`, written with the
same seed when missing) and the same fixed per-key latencies (2-4 ms, `time.sleep`, which
releases the GIL as a socket read does). It lives beside the twin, not in it, so that the
patched copy tfperf measures in a temporary folder (where this module is a link to this file)
still finds the data here.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "remote_storage"
OBJECTS = 4096
IMAGE_SIZE = 32
CLASSES = 10
LATENCY_S = (0.002, 0.004)  # per-object latency, uniform in this range


class ObjectStore:
    """A stand-in for a cloud storage client: `get(key)` blocks for the latency, then returns."""

    def __init__(self, path: Path) -> None:
        self._blob = np.load(path, mmap_mode="r")
        rng = np.random.default_rng(1)
        self._latency = rng.uniform(*LATENCY_S, size=len(self._blob))

    def get(self, key: int) -> bytes:
        time.sleep(self._latency[key])
        return bytes(self._blob[key].tobytes())


_STORE: ObjectStore | None = None


def get_object(key: np.int64) -> bytes:
    """The object at `key`, after its latency."""
    global _STORE
    if _STORE is None:
        _STORE = ObjectStore(ensure_data())
    return _STORE.get(int(key))


def ensure_data() -> Path:
    """The objects, one row of bytes each; written once (to a temporary name, then renamed)."""
    path = DATA_DIR / "objects.npy"
    if not path.exists():
        DATA_DIR.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(0)
        size = 1 + IMAGE_SIZE * IMAGE_SIZE * 3
        objects = rng.integers(0, 256, (OBJECTS, size), dtype=np.uint8)
        objects[:, 0] = rng.integers(0, CLASSES, OBJECTS)
        partial = DATA_DIR / f"objects.partial-{os.getpid()}.npy"
        np.save(partial, objects)
        partial.replace(path)
    return path
