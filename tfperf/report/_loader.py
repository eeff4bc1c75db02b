"""A DataLoader's own facts, shaped once for the terminal and the HTML report alike.

`loader_view(loader)` is the data: a heading and labelled rows, each figure formatted here and
nowhere else; `loader_text(view)` writes it for the terminal, and the HTML template draws the
same rows as a table (`templates/_profile.html.j2`), so both say the same figures in the same
words.

Example:
    >>> view = loader_view(LoaderReport(workers=0, persistent_workers=False))
    >>> loader_text(view)
    'DataLoader: 0 workers (in the trainer)'
"""

from __future__ import annotations

import dataclasses

from tfperf.results.stages import LoaderReport
from tfperf.units import format_bytes, format_seconds


@dataclasses.dataclass(frozen=True)
class LoaderView:
    """What the report says about a DataLoader: a heading, then (label, words) rows."""

    heading: str
    rows: tuple[tuple[str, str], ...]


def loader_view(loader: LoaderReport) -> LoaderView:
    """The heading and rows of `loader`'s block; rows whose figure was not measured are left out."""
    kept = "kept across epochs" if loader.persistent_workers else "started at each epoch"
    workers = f"{loader.workers} worker{'s' * (loader.workers != 1)}"
    heading = f"DataLoader: {workers}" + (f", {kept}" if loader.workers else " (in the trainer)")
    rows = [
        ("first batch", _first_batch(loader)),
        ("items", _items(loader)),
        ("collate", _collate(loader)),
        ("workers estimate", _estimate(loader)),
        ("host RAM of trainer and workers", _host_ram(loader)),
        ("examples per pass", _pass(loader)),
        ("workers' private memory", _worker_memory(loader)),
    ]
    return LoaderView(heading, tuple((label, words) for label, words in rows if words))


def loader_statements(loader: LoaderReport) -> tuple[str, ...]:
    """What went wrong under these workers, each a sentence with its fix: a pass that yields
    other examples than the dataset's (`PassCheck`), workers' memory that grows over a pass or
    a /dev/shm near full (`WorkerMemory`). Empty when nothing did."""
    check, memory = loader.pass_check, loader.worker_memory
    statements = [
        check.statement() if check is not None else None,
        memory.statement(_dataset(loader)) if memory is not None else None,
    ]
    return tuple(statement for statement in statements if statement)


def loader_text(view: LoaderView) -> str:
    """The block for the terminal: the heading, then one indented `label: words` line a row."""
    return "\n".join([view.heading, *(f"  {label}: {words}" for label, words in view.rows)])


def _first_batch(loader: LoaderReport) -> str:
    if loader.first_batch_s is None:
        return ""
    words = f"{format_seconds(loader.first_batch_s)} after a fresh pass starts"
    if loader.workers and not loader.persistent_workers:
        return f"{words}, workers started: paid again at each epoch (no persistent_workers)"
    if loader.workers:
        return f"{words}, workers started: paid once, the workers are kept"
    return words


def _items(loader: LoaderReport) -> str:
    if loader.wall_s_per_item is None or loader.cpu_s_per_item is None:
        return ""
    where = f" ({loader.item_where})" if loader.item_where else ""
    words = (
        f"{format_seconds(loader.wall_s_per_item)} wall, "
        f"{format_seconds(loader.cpu_s_per_item)} CPU each in {loader.item_function}{where}"
    )
    if loader.items_wait:
        return f"{words}: mostly waiting (a blocking read), so workers beyond the cores help"
    return f"{words}: mostly computing, so workers beyond the cores only queue for them"


def _collate(loader: LoaderReport) -> str:
    if loader.collate_wall_s_per_batch is None:
        return ""
    words = f"{format_seconds(loader.collate_wall_s_per_batch)} wall"
    if loader.collate_cpu_s_per_batch is not None:
        words += f", {format_seconds(loader.collate_cpu_s_per_batch)} CPU"
    words += f" per batch of {loader.items_per_batch}"
    if loader.collate_function:
        where = f" ({loader.collate_where})" if loader.collate_where else ""
        words += f" in {loader.collate_function}{where}"
    return words


def _estimate(loader: LoaderReport) -> str:
    if loader.workers_estimate is None:
        return ""
    one = loader.workers_estimate == 1
    return (
        f"about {loader.workers_estimate} worker{'' if one else 's'}: more add no speed here "
        "(tfperf's estimate: Little's law on the items' wall time at twice the step's rate, "
        "capped where the cores run out)"
    )


def _host_ram(loader: LoaderReport) -> str:
    if loader.host_ram_peak_bytes is None:
        return ""
    return (
        f"peak {format_bytes(loader.host_ram_peak_bytes)}, the workers' own pages "
        f"{format_bytes(loader.workers_ram_peak_bytes or 0)} (pages shared with the trainer "
        "counted once)"
    )


def _pass(loader: LoaderReport) -> str:
    check = loader.pass_check
    if check is None:
        return ""
    statement = check.statement()
    if statement is not None:
        return statement
    if check.ratio is not None:
        return (
            f"{check.examples} under {check.workers} workers, as many as the dataset read once "
            "in the trainer: each worker reads its own share"
        )
    return (
        f"{check.sampled} examples sampled under {check.workers} workers repeat no more than "
        "in the dataset read once in the trainer"
    )


def _worker_memory(loader: LoaderReport) -> str:
    memory = loader.worker_memory
    if memory is None:
        return ""
    statement = memory.statement(_dataset(loader))
    span = "a pass" if memory.complete else f"{memory.batches} batches"
    words = (
        f"{format_bytes(memory.start_private_bytes)} at the start of {span}, "
        f"{format_bytes(memory.end_private_bytes)} at its end ({memory.workers} workers)"
    )
    if memory.shm_end_bytes is not None and memory.shm_total_bytes:
        words += (
            f"; /dev/shm {format_bytes(memory.shm_end_bytes)} of "
            f"{format_bytes(memory.shm_total_bytes)} in use"
        )
    return f"{words}. {statement}" if statement else words


def _dataset(loader: LoaderReport) -> str:
    """The dataset's class, from the function that loads its items (`Rows.__getitem__`)."""
    if loader.item_function:
        return loader.item_function.partition(".")[0]
    return "the dataset"
