"""Host memory by buffer: the account of what a pipeline's buffers hold, and the advice.

Pure functions on `BufferHold` records (a framework reads them from its stage graph): the
holds are summed, set beside the measured peak RSS, and each large hold gets the change that
shrinks it. Tests assert exact figures and text.
"""

from __future__ import annotations

from collections.abc import Sequence

from tfperf.results.stages import BufferHold, BufferKind, MemoryAccount
from tfperf.units import format_bytes

#: Below this a hold gets no advice: shrinking it would not change what the process needs.
ADVICE_FLOOR_BYTES = 64 * 2**20


def memory_account(
    holds: Sequence[BufferHold], peak_rss_bytes: int | None, ram_budget_bytes: int | None
) -> MemoryAccount:
    """The account of `holds` beside the peak RSS, with the advice that follows from it.

    Example:
        >>> from tfperf.results.stages import SizeSource
        >>> hold = BufferHold("shuffle(8)", BufferKind.SHUFFLE, None, 8, 1024.0, SizeSource.SPEC)
        >>> memory_account([hold], None, None).total_bytes
        8192.0
    """
    advice = [
        text
        for hold in sorted(holds, key=lambda h: -h.bytes)
        for text in _advise(hold, ram_budget_bytes)
    ]
    advice += _budget_advice(holds, ram_budget_bytes)
    return MemoryAccount(
        holds=list(holds),
        peak_rss_bytes=peak_rss_bytes,
        ram_budget_bytes=ram_budget_bytes,
        advice=advice,
    )


def _advise(hold: BufferHold, budget: int | None) -> list[str]:
    if hold.bytes < ADVICE_FLOOR_BYTES:
        return []
    found = []
    held = f"{hold.stage} holds {format_bytes(hold.bytes)} ({_elements(hold)})"
    if hold.kind is BufferKind.SHUFFLE and hold.enlarged_by and hold.bytes_before is not None:
        smaller = hold.elements * hold.bytes_before
        found.append(
            f"{held} of {hold.enlarged_by}'s output: shuffle the file names or the records "
            f"before decoding (move the shuffle before {hold.enlarged_by}), and the buffer "
            f"holds {format_bytes(smaller)} of its input instead."
        )
    elif hold.kind is BufferKind.CACHE and budget is not None and hold.bytes > budget:
        where = f"before {hold.enlarged_by}" if hold.enlarged_by else "before the expensive stage"
        found.append(
            f"{held}, more than the RAM budget ({format_bytes(budget)}): cache {where} only "
            "when what it holds there fits, or cache to a file (cache(filename))."
        )
    if hold.cast_by:
        found.append(
            f"{held} of floats that {hold.cast_by} made from integer data: cast after "
            "batching, or in the model's first layer, so the buffers hold the integers "
            "(a quarter of the bytes for uint8 pixels as float32)."
        )
    return found


def _budget_advice(holds: Sequence[BufferHold], budget: int | None) -> list[str]:
    """`ram_budget` advice when AUTOTUNE sizes buffers that matter, or all of them exceed it."""
    autotuned = [h for h in holds if h.note and "AUTOTUNE" in h.note]
    total = sum(h.bytes for h in holds)
    over = budget is not None and total > budget
    if not over and sum(h.bytes for h in autotuned) < ADVICE_FLOOR_BYTES:
        return []
    limit = f"the RAM budget ({format_bytes(budget)})" if budget is not None else "what fits"
    return [
        f"The buffers hold {format_bytes(total)} at most"
        + (f", over {limit}" if over else "")
        + ": set `options.autotune.ram_budget` to cap what AUTOTUNE's buffers may take, "
        "and lower the fixed buffer sizes above."
    ]


def _elements(hold: BufferHold) -> str:
    count = f"{hold.elements:,} element{'s' * (hold.elements != 1)}"
    return f"{count} of {format_bytes(hold.bytes_per_element)}"
