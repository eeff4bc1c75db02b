"""What each structure edit was worth in a zero-change study, for the hand-over record.

A structure edit (`tfperf.frameworks.tensorflow._edits`: a `cache()` added, a shuffle moved
before a map, a map moved after its batch) is one categorical dimension of the search: 0 as
written, 1 made.
Its worth is read from the study's finished trials: the best throughput among trials that
made it over the best among trials that did not. The other knobs are free on both sides, so
this is the edit's best case against the best case without it, as each trial measured it once
(not re-measured): a gain near 1 says the search found as good without it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tfperf.results.discovery import Discovery
from tfperf.results.tune import EditGain
from tfperf.sites import Patch, describe_edit, edit_sites


def edit_gains(
    discovery: Discovery,
    patch: Patch | None,
    trials: Sequence[tuple[Mapping[str, int | None], float]],
) -> list[EditGain]:
    """One `EditGain` per edit site of `discovery`; `trials` are (site values, examples/s) of
    the study's finished trials; an edit is `used` when `patch` writes it."""
    made = {change.site.name for change in patch.written} if patch is not None else set()
    gains = []
    for site in edit_sites(discovery):
        with_it = [rate for values, rate in trials if values.get(site.name) == 1]
        without = [rate for values, rate in trials if values.get(site.name) != 1]
        best_without = max(without, default=0.0)
        gain = max(with_it) / best_without if with_it and best_without > 0 else None
        what = describe_edit(site).split(": ", 1)[1]
        gains.append(EditGain(site.name, what, site.name in made, gain, len(with_it), len(without)))
    return gains
