"""What the recorder keeps of each call: where it was made, its runs, its argument's values.

A call is where it was made (`tfperf.frameworks.Place`); `Run` is one run of it and the recorded
calls it ran inside; `Seen` is one argument over every run. `site_of` turns one into a `CallSite`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tfperf import frameworks
from tfperf.frameworks import Place, site_at
from tfperf.knobs import format_site_value
from tfperf.results.discovery import CallSite


@dataclasses.dataclass(eq=False)
class Run:
    """One run of a recorded call: what it returned, and the recorded calls it ran inside.

    A call made while tf.data traces an `interleave` function runs inside that interleave:
    it feeds the measured dataset when the interleave does, though no input of it leads there.
    """

    parents: tuple[Run, ...]
    results: list[Any] = dataclasses.field(default_factory=list)

    def feeds(self, chain: set[int]) -> bool:
        return any(id(result) in chain for result in self.results) or any(
            parent.feeds(chain) for parent in self.parents
        )


@dataclasses.dataclass
class Seen(frameworks.Seen):
    """One argument of one tf.data call (`method`), over its `runs`."""

    method: str
    runs: list[Run]


def site_of(name: str, seen: Seen) -> CallSite:
    return seen.site(name, seen.method, seen.argument, len(seen.runs))


def inserted_site(name: str, place: Place) -> CallSite:
    return site_at(Place(place.file, place.line), name, "prefetch", "buffer_size")


def varies(values: list[int | None]) -> str | None:
    if len(values) < 2:
        return None
    shown = ", ".join(format_site_value(value) for value in values)
    return f"takes different values on different calls ({shown}); tfperf tunes one value per call"


def seen_text(seen: Seen) -> str:
    return f"{seen.method}({seen.argument}=...)"


def seen_order(seen: Seen) -> tuple[str, int, int, int, str]:
    """File, line, then where the call ends: `ds.shuffle(9).batch(4)` lists shuffle first."""
    place = seen.place
    end_line = place.end_line if place.end_line is not None else place.line
    return place.file, place.line, end_line, place.end_col or -1, seen.argument
