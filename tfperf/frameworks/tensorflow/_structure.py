"""Structure edits the recorder can apply during a trial: a `prefetch` after an `interleave`.

An `interleave` that reads files and feeds a `map` hands elements over one at a time: while
the map works, the interleave's cycle waits, and while the interleave reads, the map waits.
A `prefetch` between them decouples the two. tfperf records one candidate site per such
interleave in the user's files, named like a prefetch on the interleave's line
(`prefetch@input.py:12.buffer_size`), written value 0 (none) and `calls` 0 (the code has no
such call); its columns are those of the interleave call, where the patch appends
`.prefetch(N)`. The search measures it like any prefetch site (0-8 and AUTOTUNE), so what it
is worth on this pipeline is what the trials measured, not a rule.

A line that already names a `prefetch` call gets no candidate (its name would be that call's).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tfperf.frameworks import Place, site_at
from tfperf.frameworks.tensorflow import _tf
from tfperf.knobs import AUTOTUNE
from tfperf.results.discovery import CallSite


@dataclasses.dataclass
class AfterInterleave:
    """One interleave call of the user's (written at `place`, with its span) and what its
    runs returned."""

    place: Place
    outputs: list[Any] = dataclasses.field(default_factory=list)
    added: list[Any] = dataclasses.field(default_factory=list)  # the prefetches applied

    @property
    def name(self) -> str:
        return self.place.name("prefetch", "buffer_size")

    def site(self) -> CallSite:
        return site_at(self.place, self.name, "prefetch", "buffer_size")


def added_prefetch(output: Any, value: int | None) -> Any | None:
    """`output.prefetch(value)` for a value that adds one (N > 0 or AUTOTUNE), else None."""
    if value is None or not (value > 0 or value == AUTOTUNE):
        return None
    return output.prefetch(value)


def feeds_a_map(candidate: AfterInterleave, chain: list[Any]) -> bool:
    """Whether, in the measured `chain`, the interleave's output (through the prefetch tfperf
    applied, if any) is read by a `map` and by nothing else."""
    outputs = {id(each) for each in candidate.outputs}
    added = {id(each) for each in candidate.added}
    readers = [
        _tf.method_of(each).name
        for each in chain
        if id(each) not in outputs | added
        and any(id(below) in outputs | added for below in _tf.inputs(each))
    ]
    return bool(readers) and all(name == "map" for name in readers)
