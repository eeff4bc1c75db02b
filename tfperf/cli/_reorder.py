"""`tfperf tune --reorder`: whether a map may be moved after the batch that reads it.

Moving a map after `batch` runs its function on whole batches. tfperf proposes it only where
the function traces on the batched element spec to the batch of its results, but a function
that reduces over its input (a per-image mean) then reduces over the batch: what it computes
may change. So the search holds the edit (`map@FILE:LINE.after_batch`) as written
(`tfperf.tuner.site_space`) unless `--reorder` asks for it; without the flag the study says so
before it starts.
"""

from __future__ import annotations

import dataclasses
import sys

from tfperf.knobs import Choices
from tfperf.pipeline import PipelineFile

__all__ = ["reorder_when_asked"]


def reorder_when_asked(pipeline: PipelineFile, *, asked: bool) -> PipelineFile:
    """`pipeline` with each map-after-batch edit searched (0 or 1) when `asked`; else as it
    is (the edit stays as written), said on stderr."""
    if pipeline.discovery is None:
        return pipeline
    from tfperf.sites import reorder_sites

    names = reorder_sites(pipeline.discovery)
    if not names:
        return pipeline
    if not asked:
        print(
            "Not searched without --reorder (a map run on whole batches may compute something "
            f"else): {', '.join(names)}",
            file=sys.stderr,
        )
        return pipeline
    space = dict(pipeline.search_space)
    space.update({name: Choices((0, 1)) for name in names if name not in space})
    return dataclasses.replace(pipeline, search_space=space)
