"""What one checked pass of a DataLoader found: its data against the trainer's, its workers' memory.

Two things a DataLoader's speed figures cannot show go wrong under a configuration:

- **the data changes.** An `IterableDataset` that does not shard its stream by
  `torch.utils.data.get_worker_info()` is iterated whole by every worker: with N workers a pass
  yields N times the examples, all duplicates, and reads N times as fast. `PassCheck` holds one
  pass under the configuration beside the dataset read once in the trainer (one stream, as with
  0 workers): their example counts, and how often the examples repeat in equal samples of each
  (a fingerprint of each example's bytes);
- **the workers' memory grows.** A worker forked from the trainer shares its pages until it
  writes to them, and touching a Python object writes its reference count: a dataset held in
  lists or dicts of Python objects is copied, page by page, into every worker as a pass reads
  it, and `/dev/shm` holds the batches in flight. `WorkerMemory` holds the workers' private
  bytes and `/dev/shm` in use at the start and the end of the checked pass.

The thresholds are named policy, each with its reason. Plain records: they round-trip through
JSON, and the report reads them on a machine without torch.

Example:
    >>> check = PassCheck(dataset="Lines", workers=4, examples=400, complete=True,
    ...                   reference_examples=100, reference_complete=True)
    >>> check.changes_data, check.ratio
    (True, 4.0)
"""

from __future__ import annotations

import dataclasses

#: Repeats per example in a sample, beyond the trainer's own, that mean duplicated data: two
#: workers each yielding the whole stream repeat every example twice (2.0), a sharded stream
#: none (1.0); halfway tells them apart while a few repeats at a sample's edge do not.
REPEAT_FACTOR = 1.5
#: A worker's private pages that grow more than this over a pass grow from its dataset: its
#: allocator, its collate buffers and pickling move them by a few MiB, copy-on-write of a
#: dataset held in Python objects by the dataset's size.
GROWTH_NOISE_BYTES = 16 * 2**20
#: `/dev/shm` this nearly full at the end of a pass risks a worker's "Bus error": the batches
#: in flight live there, and a few more workers or a larger batch take the rest.
SHM_FREE_FLOOR = 0.1
#: PyTorch's words on the fix, where they stand.
ITERABLE_DOCS = "https://pytorch.org/docs/stable/data.html#torch.utils.data.IterableDataset"


@dataclasses.dataclass(frozen=True)
class PassCheck:
    """A pass of an `IterableDataset`'s loader against the dataset read once in the trainer.

    Attributes:
        dataset: the dataset's class, e.g. `Lines`.
        workers: the loader's worker processes in the checked pass.
        examples: examples the loader yielded in it (all of a pass when `complete`).
        complete: the pass ended within the check's bound.
        reference_examples: examples read from the dataset in the trainer, where
            `get_worker_info()` is None: one stream, as with `num_workers=0`.
        reference_complete: that read reached the dataset's end within the bound.
        repeat_factor: how many times each example recurs in the loader's sample over in the
            trainer's, samples of equal size fingerprinted by their bytes: about N for N
            workers each yielding the whole stream, 1 for a sharded one; None when fewer than
            two examples were fingerprinted on either side.
        sampled: examples fingerprinted on each side.
    """

    dataset: str
    workers: int
    examples: int
    complete: bool
    reference_examples: int
    reference_complete: bool
    repeat_factor: float | None = None
    sampled: int = 0

    @property
    def ratio(self) -> float | None:
        """Examples in a pass over the trainer's: both read to their end; None otherwise."""
        if not (self.complete and self.reference_complete) or self.reference_examples < 1:
            return None
        return self.examples / self.reference_examples

    @property
    def repeats(self) -> bool:
        """Whether the loader's examples recur beyond the trainer's (`REPEAT_FACTOR`)."""
        return self.repeat_factor is not None and self.repeat_factor >= REPEAT_FACTOR

    @property
    def overflows(self) -> bool:
        """Whether the loader yielded more examples than the whole dataset holds, before its
        pass ended or the check stopped it: duplicates, however the pass would have ended."""
        return self.reference_complete and self.examples > self.reference_examples

    @property
    def changes_data(self) -> bool:
        """Whether a pass under this configuration yields other examples than the dataset's."""
        ratio = self.ratio
        differ = ratio is not None and self.examples != self.reference_examples
        return differ or self.overflows or self.repeats

    @property
    def factor(self) -> float | None:
        """How many times the dataset's examples a pass yields: the counts' ratio when both
        passes ended, else the repeats in the sample (or, if more, the examples the loader
        yielded over the dataset's, a floor); None when none is known."""
        ratio = self.ratio
        if ratio is not None:
            return ratio
        floor = self.examples / self.reference_examples if self.overflows else None
        known = [value for value in (self.repeat_factor, floor) if value is not None]
        return max(known) if known else None

    def statement(self) -> str | None:
        """The finding in words, naming the dataset, then the fix; None when the data is intact.

        Example:
            >>> PassCheck("Lines", 2, 20, True, 10, True).statement()[:60]
            '`Lines` is an IterableDataset that every worker reads whole:'
        """
        text = self.text()
        return f"{text} {self.fix()}" if text is not None else None

    @property
    def duplicates(self) -> bool:
        """Whether a pass yields more examples than the dataset's (not fewer)."""
        return (self.factor or 1.0) >= 1

    def text(self) -> str | None:
        """What a pass under these workers yields, against the dataset; None when intact."""
        if not self.changes_data:
            return None
        factor = self.factor or 1.0
        if self.ratio is not None:
            what = (
                f"a pass yields {factor:.3g}x the examples of one pass ({self.examples} against "
                f"{self.reference_examples} read once in the trainer)"
            )
        else:  # the pass did not end within the check: what its first examples show
            what = (
                f"the examples recur {factor:.3g}x as often as in the dataset read once in the "
                f"trainer ({self.examples} yielded before the check stopped, "
                f"{self.reference_examples} read; {self.sampled} compared)"
            )
        if not self.duplicates:
            return (
                f"`{self.dataset}` is an IterableDataset whose workers lose examples: under "
                f"num_workers={self.workers} {what}, so the rates measured under it count "
                "less data, not speed."
            )
        # N copies for N workers, both passes counted: each worker reads the whole stream.
        whole = self.ratio is not None and abs(factor - self.workers) < REPEAT_FACTOR - 1
        how = "that every worker reads whole" if whole else "whose workers yield the same examples"
        return (
            f"`{self.dataset}` is an IterableDataset {how}: under num_workers={self.workers} "
            f"{what}: duplicates, so the rates measured under it count duplicates, not speed."
        )

    def fix(self) -> str:
        """Shard the stream by worker, in PyTorch's words; for drops, what loses them."""
        words = (
            'PyTorch: "each worker process will have a different copy of the dataset object, '
            "so it is often desired to configure each copy independently to avoid having "
            f'duplicate data returned from the workers", {ITERABLE_DOCS}'
        )
        if self.duplicates:
            return (
                "Shard the stream in `__iter__`: read `torch.utils.data.get_worker_info()` and "
                f"keep every `num_workers`-th item from `id` on ({words})."
            )
        return (
            "Check that `__iter__` hands every item to exactly one worker by "
            "`torch.utils.data.get_worker_info()`, and that drop_last does not drop each "
            f"worker's last partial batch ({words})."
        )


@dataclasses.dataclass(frozen=True)
class WorkerMemory:
    """The workers' private memory and `/dev/shm` at the start and the end of a checked pass.

    Attributes:
        workers: worker processes read (the loader's children).
        start_private_bytes: their private pages (USS) together, after the pass's first batch.
        end_private_bytes: the same at its last batch (or where the check stopped).
        batches: batches between the first reading and the last.
        pass_batches: batches in a whole pass; None when the dataset has no length.
        complete: the check read the pass to its end.
        shm_start_bytes: bytes in use on `/dev/shm` (all processes of the machine) at the
            first reading; None where there is no `/dev/shm`.
        shm_end_bytes: the same at the last reading.
        shm_total_bytes: its size.
    """

    workers: int
    start_private_bytes: int
    end_private_bytes: int
    batches: int
    pass_batches: int | None = None
    complete: bool = False
    shm_start_bytes: int | None = None
    shm_end_bytes: int | None = None
    shm_total_bytes: int | None = None

    @property
    def growth_per_worker_bytes(self) -> float:
        """Private bytes each worker gained over the pass, on average."""
        return (self.end_private_bytes - self.start_private_bytes) / max(self.workers, 1)

    @property
    def end_per_worker_bytes(self) -> float:
        """Each worker's private bytes at the pass's end: what every worker more would cost."""
        return self.end_private_bytes / max(self.workers, 1)

    @property
    def grows(self) -> bool:
        """Whether the workers' private pages grow beyond noise (`GROWTH_NOISE_BYTES`)."""
        return self.growth_per_worker_bytes > GROWTH_NOISE_BYTES

    @property
    def shm_short(self) -> bool:
        """Whether `/dev/shm` ended the pass with under `SHM_FREE_FLOOR` of it free."""
        if self.shm_end_bytes is None or not self.shm_total_bytes:
            return False
        return self.shm_total_bytes - self.shm_end_bytes < SHM_FREE_FLOOR * self.shm_total_bytes

    def statement(self, dataset: str) -> str | None:
        """The findings in words, each with its fix; None when neither grows nor runs short."""
        sentences = [
            f"{text} {fix}"
            for text, fix in (
                (self.growth_text(dataset), _GROWTH_FIX),
                (self.shm_text(), _SHM_FIX),
            )
            if text is not None
        ]
        return " ".join(sentences) or None

    def growth_text(self, dataset: str) -> str | None:
        """How much each worker's private memory grew, and why; None within the noise."""
        if not self.grows:
            return None
        span = "the pass" if self.complete else f"{self.batches} batches"
        of = f" of {self.pass_batches}" if not self.complete and self.pass_batches else ""
        return (
            f"Each worker's private memory grew by {_mib(self.growth_per_worker_bytes)} over "
            f"{span}{of} (to {_mib(self.end_per_worker_bytes)}): it copies `{dataset}`'s pages "
            "as it reads them, which happens to a dataset held in Python lists or dicts "
            "(touching an object writes its reference count)."
        )

    @staticmethod
    def growth_fix() -> str:
        """What stops a worker's copy of a dataset held in Python objects."""
        return _GROWTH_FIX

    @staticmethod
    def shm_fix() -> str:
        """What gives the batches in flight room on /dev/shm."""
        return _SHM_FIX

    def shm_text(self) -> str | None:
        """How full /dev/shm was at the pass's end; None with room to spare."""
        if not self.shm_short or self.shm_end_bytes is None or not self.shm_total_bytes:
            return None
        return (
            f"/dev/shm is {self.shm_end_bytes / self.shm_total_bytes:.0%} full at the pass's "
            f"end ({_mib(self.shm_end_bytes)} of {_mib(self.shm_total_bytes)}): workers fail "
            'with "Bus error" when it fills.'
        )


_GROWTH_FIX = (
    "Hold the data in numpy arrays or a memory-mapped file, or use fewer workers; the RAM a "
    "run needs is the end-of-pass figure times the workers."
)
_SHM_FIX = (
    "Use fewer workers or a lower prefetch_factor, or a larger /dev/shm (`docker run --shm-size`)."
)


def _mib(count: float) -> str:
    return f"{count / 2**20:,.1f} MiB"
