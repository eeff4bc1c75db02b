"""Host memory by buffer: what each buffering stage of a pipeline holds, and the advice.

A profile measures the peak resident memory of the process; this record says where it goes in
the input pipeline: every stage that holds elements (a shuffle buffer, a prefetch buffer, an
in-memory cache, an interleave's open inputs, a parallel map's elements in flight, a
`padded_batch` being built) holds at most `elements` of `bytes_per_element` each. The sum is
set beside the measured peak RSS, and the advice says what would shrink the largest holds
(`memory_account`: pure, so tests assert exact figures and text).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from enum import Enum

from tfperf.results._json import JsonRecord
from tfperf.units import format_bytes


class BufferKind(str, Enum):
    """What kind of stage holds the elements, which decides how many it holds."""

    SHUFFLE = "shuffle"  # buffer_size elements
    PREFETCH = "prefetch"  # buffer_size elements (AUTOTUNE: what it settled on)
    CACHE = "cache"  # every element of one pass, when cached in memory
    INTERLEAVE = "interleave"  # one element per open input of the cycle
    PARALLEL_MAP = "parallel-map"  # num_parallel_calls elements in flight
    PADDED_BATCH = "padded-batch"  # the batch being built

    @property
    def method(self) -> str:
        """The tf.data method whose call holds such a buffer (a parallel map's: `map`)."""
        return "map" if self is BufferKind.PARALLEL_MAP else self.value.replace("-", "_")


class SizeSource(str, Enum):
    """Where an element's bytes came from."""

    SPEC = "spec"  # the element spec: every shape fully known
    MEASURED = "measured"  # the mean over the first elements (shapes vary, or strings)


#: Buffers whose size an argument sets, which AUTOTUNE may choose.
_AUTOTUNABLE = frozenset({BufferKind.PREFETCH, BufferKind.PARALLEL_MAP, BufferKind.INTERLEAVE})


@dataclasses.dataclass
class BufferHold:
    """What one buffering stage holds at most.

    Attributes:
        stage: the stage's label, e.g. `shuffle(1024)`.
        kind: what kind of buffer it is.
        location: `file:line` of the function feeding it, where known.
        elements: elements it holds at most.
        bytes_per_element: bytes of one of those elements.
        size_source: where `bytes_per_element` came from.
        note: how `elements` was counted where it is not written in the call (AUTOTUNE).
        enlarged_by: the map below this buffer that enlarges its elements the most (a
            decode), whose input the buffer could hold instead; None when no map enlarges them.
        bytes_before: bytes of one element at that map's input; None with `enlarged_by` None.
        cast_by: a map below this buffer that turns integer data into floats (e.g. uint8
            pixels into float32), so the buffer holds the floats; None when none does.
        batched: its elements are batches, so their bytes follow the batch size.
    """

    stage: str
    kind: BufferKind
    location: str | None
    elements: int
    bytes_per_element: float
    size_source: SizeSource
    note: str | None = None
    enlarged_by: str | None = None
    bytes_before: float | None = None
    cast_by: str | None = None
    batched: bool = False

    @property
    def bytes(self) -> float:
        """Bytes held at most: elements times bytes per element."""
        return self.elements * self.bytes_per_element

    @staticmethod
    def pass_note(elements: int) -> str:
        """The `note` of a buffer that one pass of its input fills before its written size."""
        return f"the {elements:,} elements of one pass"

    @property
    def autotuned(self) -> bool:
        """Whether AUTOTUNE sized it: only AUTOTUNE notes a prefetch, map or interleave."""
        return self.note is not None and self.kind in _AUTOTUNABLE

    @property
    def fills_a_pass(self) -> bool:
        """Whether one pass of its input fills it before its written size (`pass_note`)."""
        return self.note == self.pass_note(self.elements)


@dataclasses.dataclass
class MemoryAccount(JsonRecord):
    """The pipeline's buffers, their sum, the measured peak RSS they sit in, and the advice.

    Attributes:
        holds: one entry per buffering stage, source first.
        peak_rss_bytes: the profile's measured peak resident memory; None when not measured.
        ram_budget_bytes: the RAM budget the advice weighs caches against.
        advice: one sentence per thing to change, largest hold first; empty when nothing is.
    """

    holds: list[BufferHold]
    peak_rss_bytes: int | None
    ram_budget_bytes: int | None
    advice: list[str] = dataclasses.field(default_factory=list)

    @property
    def total_bytes(self) -> float:
        """Bytes all buffers hold at most, summed."""
        return math.fsum(hold.bytes for hold in self.holds)

    @property
    def share_of_peak(self) -> float | None:
        """`total_bytes` as a share of the measured peak RSS; None without a peak."""
        if not self.peak_rss_bytes:
            return None
        return self.total_bytes / self.peak_rss_bytes

    def largest(self) -> BufferHold | None:
        """The hold with the most bytes; None when the pipeline buffers nothing."""
        return max(self.holds, key=lambda hold: hold.bytes, default=None)


#: Below this a hold gets no advice: shrinking it would not change what the process needs.
ADVICE_FLOOR_BYTES = 64 * 2**20


def memory_account(
    holds: Sequence[BufferHold], peak_rss_bytes: int | None, ram_budget_bytes: int | None
) -> MemoryAccount:
    """The account of `holds` beside the peak RSS, with the advice that follows from it.

    Example:
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
    elif hold.kind is BufferKind.PREFETCH and not hold.autotuned:
        found.append(
            f"{held}: a prefetch needs only the batches that hide one step's wait; "
            "prefetch(tf.data.AUTOTUNE) sizes it, and `options.autotune.ram_budget` caps it."
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
    autotuned = [h for h in holds if h.autotuned]
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
