"""What the checked pass found, as findings in the DataLoader's words.

The checked pass (`_pass`) leaves two records on the loader's report: `PassCheck` (the data a
pass yields against the dataset's) and `WorkerMemory` (the workers' private pages and
/dev/shm over a pass). Each becomes a finding here, made only when its record says something
is wrong, so the short answer names it beside the speed figures:

- `changed-data` (fix): a pass under these workers yields other examples than the dataset's;
  every rate of the profile counts them, so it is the heaviest finding there is;
- `worker-memory-growth` (fix): each worker copies the dataset's pages as it reads them;
- `shm-short` (fix): /dev/shm, where the batches in flight live, is nearly full.

`worker-shards` (note) reads the end-to-end window instead: an `IterableDataset`'s workers each
batch their own share of the stream, so each pass ends in a short batch a worker.

And a finding whose fix turns a knob on that declares what to check (`Knob.check_note`:
`persistent_workers=True` keeps the workers' dataset copies and random state) says it, in the
DataLoader's words (`with_check_notes`).

Example:
    >>> [f.rule for f in loader_findings(report)]  # doctest: +SKIP
    ['changed-data']
"""

from __future__ import annotations

import dataclasses
import itertools
import statistics
from collections.abc import Sequence

from tfperf.findings import TRAINING_HAZARD_WEIGHT
from tfperf.knobs import KNOBS
from tfperf.results import ProfileResult, StepRecord
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


def worker_shards(result: ProfileResult, loader: LoaderReport) -> Finding | None:
    """Under workers, an `IterableDataset`'s passes that end in more than one short batch
    (each worker batches its own share of the stream): what training sees changes with the
    workers. Read from the end-to-end window's whole passes; None where the loader has under
    two workers, is map-style (no `pass_check`: a sampler fills its batches), or the window
    holds no whole pass, or its passes end in one short batch at most."""
    check = loader.pass_check
    records = result.end_to_end.records
    if check is None or loader.workers < 2 or not records:
        return None
    full = max(record.examples for record in records)
    passes = _whole_passes(records)
    shorts = [[r.examples for r in batches if r.examples < full] for batches in passes]
    if not passes or statistics.fmean(len(short) for short in shorts) <= 1:
        return None
    short = round(statistics.fmean(len(s) for s in shorts))
    batches = round(statistics.fmean(len(batches) for batches in passes))
    sizes = sorted({size for s in shorts for size in s})
    size = f"{sizes[0]}" if len(sizes) == 1 else f"{sizes[0]} to {sizes[-1]}"
    dropped = round(statistics.fmean(sum(s) for s in shorts))
    return Finding(
        "worker-shards",
        Level.NOTE,
        f"Each of the {loader.workers} workers batches its own share of {check.dataset}'s "
        f"stream, so a pass ends in {short} short batches ({size} examples) of {batches}, where "
        "one stream ends in one at most: training sees other batches than with "
        "num_workers=0, and a step compiled for one batch shape compiles again for the short "
        "ones.",
        f"Fewer workers make fewer; a stream split so that each worker yields a multiple of "
        f"{full} examples makes none; drop_last=True drops them ({dropped} examples a pass).",
        Evidence("end_to_end", len(passes), None, unit="passes"),
        relies_on=(f"{check.dataset} is an IterableDataset",),
        weight=TRAINING_HAZARD_WEIGHT * short / batches,
        origin="torch",
        hazard=True,
    )


def _whole_passes(records: Sequence[StepRecord]) -> list[list[StepRecord]]:
    """The window's passes that a later pass followed (the last may have been cut short)."""
    passes = [list(group) for _, group in itertools.groupby(records, key=lambda r: r.epoch)]
    return passes[:-1]


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
