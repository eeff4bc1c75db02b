"""What the checked pass found, as findings in the DataLoader's words.

The checked pass (`_pass`) leaves two records on the loader's report: `PassCheck` (the data a
pass yields against the dataset's) and `WorkerMemory` (the workers' private pages and
/dev/shm over a pass). Each becomes a finding here, made only when its record says something
is wrong, so the short answer names it beside the speed figures:

- `changed-data` (fix): a pass under these workers yields other examples than the dataset's;
  every rate of the profile counts them, so it is the heaviest finding there is;
- `worker-memory-growth` (fix): each worker copies the dataset's pages as it reads them;
- `shm-short` (fix): /dev/shm, where the batches in flight live, is nearly full.

Example:
    >>> [f.rule for f in loader_findings(report)]  # doctest: +SKIP
    ['changed-data']
"""

from __future__ import annotations

from tfperf.results.findings import Evidence, Finding, Level
from tfperf.results.stages import LoaderReport

__all__ = ["CHANGED_DATA_WEIGHT", "MEMORY_WEIGHT", "loader_findings"]

#: Duplicated or dropped examples make every rate of the profile wrong: above any share of
#: step time a finding can speak to.
CHANGED_DATA_WEIGHT = 1.0
#: Memory that runs out ends the run, however fast it was: above most time findings.
MEMORY_WEIGHT = 0.9
#: Where the figures come from, in the answer's words ("from ...").
CHECKED_PASS = "one pass of the loader after the profile"


def loader_findings(loader: LoaderReport) -> list[Finding]:
    """The findings of the checked pass on `loader`; empty when nothing went wrong."""
    found = []
    check = loader.pass_check
    text = check.text() if check is not None else None
    if check is not None and text is not None:
        found.append(
            Finding(
                "changed-data",
                Level.FIX,
                text,
                check.fix(),
                Evidence(CHECKED_PASS, check.examples, None, unit="examples"),
                relies_on=(
                    f"{check.dataset} is an IterableDataset",
                    f"the dataset read once in the trainer: {check.reference_examples} examples",
                ),
                weight=CHANGED_DATA_WEIGHT,
                origin="torch",
            )
        )
    memory = loader.worker_memory
    if memory is None:
        return found
    dataset = _dataset(loader)
    evidence = Evidence(CHECKED_PASS, memory.batches, None, unit="batches")
    for rule, words, fix in (
        ("worker-memory-growth", memory.growth_text(dataset), memory.growth_fix()),
        ("shm-short", memory.shm_text(), memory.shm_fix()),
    ):
        if words is not None:
            found.append(
                Finding(rule, Level.FIX, words, fix, evidence, weight=MEMORY_WEIGHT, origin="torch")
            )
    return found


def _dataset(loader: LoaderReport) -> str:
    """The dataset's class, from what loads its items (`Rows.__getitem__`)."""
    if loader.pass_check is not None:
        return loader.pass_check.dataset
    if loader.item_function:
        return loader.item_function.partition(".")[0]
    return "the dataset"
