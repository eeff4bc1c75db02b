"""What the checked pass found, as findings in the DataLoader's words.

The checked pass (`_pass`) leaves two records on the loader's report: `PassCheck` (the data a
pass yields against the dataset's) and `WorkerMemory` (the workers' private pages and
/dev/shm over a pass). Each becomes a finding here, made only when its record says something
is wrong, so the short answer names it beside the speed figures:

- `changed-data` (fix): a pass under these workers yields other examples than the dataset's;
  every rate of the profile counts them, so it is the heaviest finding there is;
- `worker-memory-growth` (fix): each worker copies the dataset's pages as it reads them;
- `shm-short` (fix): /dev/shm, where the batches in flight live, is nearly full.

And a finding whose fix turns a knob on that declares what to check (`Knob.check_note`:
`persistent_workers=True` keeps the workers' dataset copies and random state) says it, in the
DataLoader's words (`with_check_notes`).

Example:
    >>> [f.rule for f in loader_findings(report)]  # doctest: +SKIP
    ['changed-data']
"""

from __future__ import annotations

import dataclasses

from tfperf.knobs import KNOBS
from tfperf.results.findings import Evidence, Finding, Level
from tfperf.results.stages import LoaderReport

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


def with_check_notes(findings: list[Finding]) -> list[Finding]:
    """The findings whose fix turns on a knob that declares a `check_note` (`NAME=True` in
    its words), each with that note after its fix and in the DataLoader's words; the others
    are left out, and so is a fix that already says what to check ("check that")."""
    noted = []
    for finding in findings:
        fix = finding.fix or ""
        if "check that" in fix:
            continue
        notes = [
            knob.check_note
            for knob in KNOBS
            if knob.check_note and f"{knob.name}=True" in fix and knob.check_note not in fix
        ]
        if notes:
            noted.append(dataclasses.replace(finding, fix=" ".join([fix, *notes]), origin="torch"))
    return noted


def _dataset(loader: LoaderReport) -> str:
    """The dataset's class, from what loads its items (`Rows.__getitem__`)."""
    if loader.pass_check is not None:
        return loader.pass_check.dataset
    if loader.item_function:
        return loader.item_function.partition(".")[0]
    return "the dataset"
