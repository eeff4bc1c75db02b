"""One pass of a DataLoader after the profile, checked: its data and its workers' memory.

The profile times the loader; this pass checks what the timing cannot see (the records are in
`tfperf.results.stages`, `PassCheck` and `WorkerMemory`):

- an `IterableDataset` is also read in the trainer, where `get_worker_info()` is None (one
  stream, as with 0 workers), and collated as the loader collates. Both sides count their
  examples and fingerprint the first `SAMPLE_EXAMPLES` of them (a hash of each example's
  bytes); a stream that every worker yields whole has N times the examples, each repeated N
  times. A map-style dataset is not compared: its sampler hands each index to one worker;
- the workers' private pages (USS, `tfperf.probes.unique_memory`) and `/dev/shm` in use are
  read after the first batch and again at the last: at the batch that ends a pass of known
  length, else at the last of the readings taken every `MEMORY_INTERVAL_S` (a loader without
  `persistent_workers` stops its workers as the pass ends, so no reading can follow it).

The pass stops after `PASS_SECONDS` (the trainer's read after half of it): a long epoch is
checked over its first batches, and the records say so (`complete`). Its first batch serves
whatever needs one after the profile (the one-thread step, the copy to the GPU).

torch is imported inside functions; clocks and readers are injectable for tests.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import logging
import shutil
import time
from collections.abc import Callable, Iterator
from typing import Any

from tfperf.frameworks.torch import _torch
from tfperf.measure import batch_examples, leaves
from tfperf.probes import unique_memory
from tfperf.results.stages import PassCheck, WorkerMemory

logger = logging.getLogger(__name__)

#: The most wall seconds the checked pass takes, the trainer's read included.
PASS_SECONDS = 3.0
#: Examples fingerprinted on each side: enough for N workers' copies of the first batches to
#: show, few enough to hash in milliseconds.
SAMPLE_EXAMPLES = 4096
#: Elements of each example's tensors hashed: distinct examples differ within their first
#: thousand values; hashing whole images would cost the pass its batches.
FINGERPRINT_ELEMENTS = 1024
#: Seconds between readings of the workers' private pages, where the pass's length is unknown.
MEMORY_INTERVAL_S = 0.5
#: Where PyTorch's workers put the batches in flight.
SHM = "/dev/shm"

Clock = Callable[[], float]


@dataclasses.dataclass(frozen=True)
class CheckedPass:
    """What the checked pass found, and its first batch (None if the loader yielded none)."""

    first_batch: Any | None
    pass_check: PassCheck | None
    memory: WorkerMemory | None


@dataclasses.dataclass(frozen=True)
class _Reading:
    """The workers' private bytes and `/dev/shm` at one moment, after `batches` batches."""

    batches: int
    workers: int
    private_bytes: int
    shm: tuple[int, int] | None  # (used, total) bytes


@dataclasses.dataclass
class _Sample:
    """Examples counted in a pass and the fingerprints of its first `SAMPLE_EXAMPLES`."""

    examples: int = 0
    batches: int = 0
    complete: bool = False
    prints: list[bytes] = dataclasses.field(default_factory=list)

    def add(self, batch: Any) -> None:
        self.batches += 1
        self.examples += batch_examples(batch)
        if len(self.prints) < SAMPLE_EXAMPLES:
            self.prints.extend(fingerprints(batch)[: SAMPLE_EXAMPLES - len(self.prints)])


def check_pass(
    loader: Any,
    *,
    max_seconds: float = PASS_SECONDS,
    clock: Clock = time.perf_counter,
    read: Callable[[int], _Reading] | None = None,
) -> CheckedPass:
    """Runs one pass of `loader` (and reads its dataset in the trainer), checking both.

    Args:
        max_seconds: the most wall time, the trainer's read taking at most half of it.
        clock: seconds, for the bound.
        read: takes a memory reading after so many batches; None reads this process's
            children and `/dev/shm`.
    """
    workers = int(loader.num_workers)
    iterable = _torch.is_iterable_dataset(loader.dataset)
    reference = None
    if workers > 0 and iterable:
        reference = _trainer_read(loader, clock() + max_seconds / 2, clock)
    reader = read if read is not None else _read
    sample, first, readings = _loader_pass(
        loader, workers, clock() + max_seconds / 2, clock, reader
    )
    dataset = type(loader.dataset).__name__
    check = _compare(dataset, workers, sample, reference) if reference is not None else None
    memory = _memory(readings, sample, _torch.epoch_steps(loader)) if workers > 0 else None
    return CheckedPass(first, check, memory)


def fingerprints(batch: Any) -> list[bytes]:
    """One hash per example of `batch`: its row of every tensor leaf (the first
    `FINGERPRINT_ELEMENTS` values), and every other leaf whole."""
    count = batch_examples(batch)
    hashes = [hashlib.blake2b(digest_size=8) for _ in range(count)]
    for leaf in leaves(batch):
        shape = getattr(leaf, "shape", None)
        if shape is not None and len(shape) > 0 and shape[0] == count:
            for index, digest in enumerate(hashes):
                digest.update(_row_bytes(leaf[index]))
        else:
            whole = repr(leaf).encode()
            for digest in hashes:
                digest.update(whole)
    return [digest.digest() for digest in hashes]


def repeat_factor(loader_prints: list[bytes], trainer_prints: list[bytes]) -> float | None:
    """How many times each example recurs in the loader's sample over in the trainer's,
    compared over as many examples of each; None under two examples.

    >>> repeat_factor([b"a", b"a", b"b", b"b"], [b"a", b"b", b"c", b"d"])
    2.0
    """
    size = min(len(loader_prints), len(trainer_prints))
    if size < 2:
        return None
    return len(set(trainer_prints[:size])) / len(set(loader_prints[:size]))


def _row_bytes(row: Any) -> bytes:
    flat = row.reshape(-1)[:FINGERPRINT_ELEMENTS]
    if hasattr(flat, "cpu"):  # a tensor; bytes of any dtype, bfloat16 included
        flat = flat.detach().cpu().contiguous()
        return bytes(flat.view(_torch.import_torch().uint8).numpy()) + str(row.dtype).encode()
    tobytes = getattr(flat, "tobytes", None)
    return tobytes() if callable(tobytes) else repr(row).encode()


def _trainer_read(loader: Any, deadline: float, clock: Clock) -> _Sample:
    """The dataset read in this process (one stream) and collated as `loader` collates."""
    sample = _Sample()
    items = iter(loader.dataset)
    size = loader.batch_size
    while clock() < deadline:
        group = list(itertools.islice(items, size if size is not None else 1))
        if not group:
            sample.complete = True
            break
        if size is not None and len(group) < size and loader.drop_last:
            sample.complete = True
            break
        sample.add(loader.collate_fn(group if size is not None else group[0]))
    return sample


def _loader_pass(
    loader: Any, workers: int, deadline: float, clock: Clock, read: Callable[[int], _Reading]
) -> tuple[_Sample, Any | None, list[_Reading]]:
    """One pass of `loader` to its end or `deadline`, read after its first batch, at its last
    batch where its length is known, and every `MEMORY_INTERVAL_S` where not."""
    sample, first, readings = _Sample(), None, []
    length = _torch.epoch_steps(loader)
    last_read = clock()
    batches: Iterator[Any] = iter(_torch.Passes(loader))
    for batch in batches:
        sample.add(batch)
        if first is None:
            first = batch
        due = clock() - last_read >= MEMORY_INTERVAL_S or sample.batches == length
        if workers > 0 and (sample.batches == 1 or due):
            readings.append(read(sample.batches))
            last_read = clock()
        if clock() >= deadline:
            if workers > 0 and readings[-1].batches != sample.batches:
                readings.append(read(sample.batches))
            break
    else:
        sample.complete = True
    return sample, first, readings


def _compare(dataset: str, workers: int, loader: _Sample, trainer: _Sample) -> PassCheck:
    size = min(len(loader.prints), len(trainer.prints))
    return PassCheck(
        dataset=dataset,
        workers=workers,
        examples=loader.examples,
        complete=loader.complete,
        reference_examples=trainer.examples,
        reference_complete=trainer.complete,
        repeat_factor=repeat_factor(loader.prints, trainer.prints),
        sampled=size,
    )


def _memory(readings: list[_Reading], sample: _Sample, length: int | None) -> WorkerMemory | None:
    if not readings or readings[0].workers == 0:
        return None
    start, end = readings[0], readings[-1]
    return WorkerMemory(
        workers=end.workers,
        start_private_bytes=start.private_bytes,
        end_private_bytes=end.private_bytes,
        batches=end.batches - start.batches,
        pass_batches=length,
        # Read at the pass's last batch: a reading taken earlier leaves its end unread.
        complete=sample.complete and end.batches == sample.batches,
        shm_start_bytes=start.shm[0] if start.shm else None,
        shm_end_bytes=end.shm[0] if end.shm else None,
        shm_total_bytes=end.shm[1] if end.shm else None,
    )


def _read(batches: int) -> _Reading:
    """This process's children (the loader's workers) and `/dev/shm`, now."""
    memory = unique_memory()
    return _Reading(batches, memory.workers, memory.workers_bytes, _shm())


def _shm() -> tuple[int, int] | None:
    try:
        usage = shutil.disk_usage(SHM)
    except OSError:  # no /dev/shm here (not Linux)
        return None
    return usage.used, usage.total
