"""Host memory by buffer as a report shows it: one row per buffering stage, the sum beside
the measured peak RSS, and the advice.

The figures come from `ProfileResult.memory` (`tfperf.results.stages.MemoryAccount`); this
module only words them, for the terminal (`buffers_text`) and the HTML report (`buffer_rows`,
drawn by templates/_profile.html.j2). Nothing is shown for a pipeline that buffers nothing.
"""

from __future__ import annotations

import dataclasses

from tfperf.results.stages import BufferHold, MemoryAccount
from tfperf.units import format_bytes


@dataclasses.dataclass(frozen=True)
class BufferRow:
    """One buffering stage, in words."""

    stage: str
    elements: str
    per_element: str
    held: str
    how: str


def buffer_rows(account: MemoryAccount) -> list[BufferRow]:
    """One row per hold, source first."""
    return [_row(hold) for hold in account.holds]


def buffers_summary(account: MemoryAccount) -> str:
    """The sum of the holds beside the measured peak RSS, in one sentence."""
    total = format_bytes(account.total_bytes)
    if account.peak_rss_bytes is None:
        return f"The pipeline's buffers hold up to {total} of host memory."
    share = account.share_of_peak or 0.0
    peak = format_bytes(account.peak_rss_bytes)
    if share > 1:
        # The account is what the buffers can hold; above the measured peak they were never
        # full while profiled, and a share over 100% would say the impossible.
        return (
            f"The pipeline's buffers can hold up to {total}, more than the {peak} peak RSS "
            "measured: they were never full while profiled, and could take that much once "
            "they fill (longer epochs, a slower model)."
        )
    return (
        f"The pipeline's buffers hold up to {total}, {share:.0%} of the {peak} peak RSS measured."
    )


def buffers_text(account: MemoryAccount) -> str:
    """The terminal section; "" when the pipeline buffers nothing.

    Example:
        >>> print(buffers_text(result.memory))  # doctest: +SKIP
        Host memory by buffer: the pipeline's buffers hold up to 204 MiB, 61% of the ...
          shuffle(1024)   1,024 x 192 KiB = 192 MiB (size measured)
    """
    if not account.holds:
        return ""
    rows = buffer_rows(account)
    width = max(len(row.stage) for row in rows)
    summary = buffers_summary(account)
    lines = [f"Host memory by buffer: {summary[0].lower()}{summary[1:]}"]
    for row in rows:
        lines.append(
            f"  {row.stage:<{width}}  {row.elements} x {row.per_element} = {row.held} ({row.how})"
        )
    return "\n".join(lines)


def _row(hold: BufferHold) -> BufferRow:
    how = (
        f"size from the {'element spec' if hold.size_source.value == 'spec' else 'first elements'}"
    )
    if hold.note:
        how = f"{hold.note}; {how}"
    return BufferRow(
        stage=hold.stage,
        elements=f"{hold.elements:,}",
        per_element=format_bytes(hold.bytes_per_element),
        held=format_bytes(hold.bytes),
        how=how,
    )
