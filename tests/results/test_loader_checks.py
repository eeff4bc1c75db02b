"""A checked pass's records: what changes the data, what grows, in exact words."""

from __future__ import annotations

import dataclasses

from tfperf.results._loader_checks import GROWTH_NOISE_BYTES, ITERABLE_DOCS
from tfperf.results.stages import PassCheck, WorkerMemory

MIB = 2**20
DOUBLED = PassCheck("Lines", 2, 48, True, 24, True, repeat_factor=2.0, sampled=24)


def test_counts_that_differ_change_the_data_and_say_by_how_much() -> None:
    assert DOUBLED.ratio == 2.0 and DOUBLED.factor == 2.0 and DOUBLED.changes_data
    assert DOUBLED.statement() == (
        "`Lines` is an IterableDataset that every worker reads whole: under num_workers=2 a "
        "pass yields 2x the examples of one pass (48 against 24 read once in the trainer): "
        "duplicates, so the rates measured under it count duplicates, not speed. Shard the "
        "stream in `__iter__`: read `torch.utils.data.get_worker_info()` and keep every "
        '`num_workers`-th item from `id` on (PyTorch: "each worker process will have a '
        "different copy of the dataset object, so it is often desired to configure each copy "
        'independently to avoid having duplicate data returned from the workers", '
        f"{ITERABLE_DOCS})."
    )


def test_overlapping_parts_and_dropped_examples_are_told_apart() -> None:
    overlap = dataclasses.replace(DOUBLED, workers=4, examples=36, repeat_factor=1.5)
    assert "whose workers yield the same examples" in (overlap.text() or "")
    dropped = dataclasses.replace(DOUBLED, workers=3, examples=12, repeat_factor=1.0)
    assert dropped.changes_data and not dropped.duplicates
    assert "whose workers lose examples" in (dropped.text() or "")
    assert "yields 0.5x the examples" in (dropped.text() or "")
    assert "drop_last" in dropped.fix() and "get_worker_info()" in dropped.fix()


def test_a_pass_that_did_not_end_is_judged_by_its_repeats_and_its_overflow() -> None:
    endless = PassCheck("Endless", 2, 800, False, 400, False, repeat_factor=1.9, sampled=400)
    assert endless.ratio is None and endless.factor == 1.9 and endless.changes_data
    assert endless.text() == (
        "`Endless` is an IterableDataset whose workers yield the same examples: under "
        "num_workers=2 the examples recur 1.9x as often as in the dataset read once in the "
        "trainer (800 yielded before the check stopped, 400 read; 400 compared): duplicates, "
        "so the rates measured under it count duplicates, not speed."
    )
    fine = dataclasses.replace(endless, repeat_factor=1.1)
    assert not fine.changes_data and fine.statement() is None
    unknown = dataclasses.replace(endless, repeat_factor=None)
    assert not unknown.changes_data and unknown.factor is None
    # More examples than the whole dataset holds, however the pass would have ended.
    over = dataclasses.replace(unknown, reference_complete=True, examples=1000)
    assert over.overflows and over.changes_data and over.factor == 2.5


def test_worker_growth_beyond_the_noise_is_named_with_its_fix() -> None:
    grown = WorkerMemory(2, 2 * 20 * MIB, 2 * 60 * MIB, batches=99, pass_batches=100,
                         complete=True)  # fmt: skip
    assert grown.growth_per_worker_bytes == 40 * MIB > GROWTH_NOISE_BYTES and grown.grows
    assert grown.end_per_worker_bytes == 60 * MIB
    assert grown.growth_text("Rows") == (
        "Each worker's private memory grew by 40.0 MiB over the pass (to 60.0 MiB): it copies "
        "`Rows`'s pages as it reads them, which happens to a dataset held in Python lists or "
        "dicts (touching an object writes its reference count)."
    )
    assert "numpy arrays or a memory-mapped file" in grown.growth_fix()
    partial = dataclasses.replace(grown, complete=False, batches=30)
    assert "over 30 batches of 100" in (partial.growth_text("Rows") or "")
    flat = dataclasses.replace(grown, end_private_bytes=2 * 21 * MIB)
    assert not flat.grows and flat.statement("Rows") is None


def test_a_nearly_full_dev_shm_is_named() -> None:
    memory = WorkerMemory(2, MIB, MIB, 10, shm_start_bytes=0, shm_end_bytes=95 * MIB,
                          shm_total_bytes=100 * MIB)  # fmt: skip
    assert memory.shm_short
    assert memory.shm_text() == (
        "/dev/shm is 95% full at the pass's end (95.0 MiB of 100.0 MiB): workers fail with \"Bus "
        'error" when it fills.'
    )
    assert "--shm-size" in memory.shm_fix()
    roomy = dataclasses.replace(memory, shm_end_bytes=50 * MIB)
    assert not roomy.shm_short and roomy.statement("Rows") is None
