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
from tfperf.pipeline import PipelineFile, PipelineKind


def reorder_when_asked(pipeline: PipelineFile, *, asked: bool) -> PipelineFile:
    """`pipeline` with each map-after-batch edit searched (0 or 1) when `asked`; else as it
    is (the edit stays as written), said on stderr."""
    if pipeline.discovery is None:
        if asked and pipeline.kind is PipelineKind.KNOBS:
            _note(
                f"--reorder has no effect on {pipeline.path.name}: its make_dataset(knobs) "
                "builds the pipeline in its own order, and tfperf moves maps only in a plain "
                "file or a script. Move the map after batch in make_dataset to try it."
            )
        return pipeline
    from tfperf.sites import reorder_sites

    names = reorder_sites(pipeline.discovery)
    if not names:
        if asked:
            _note(
                f"--reorder has no effect on {pipeline.path.name}: tfperf found no map in it "
                "that it can move after its batch."
            )
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


def _note(text: str) -> None:
    print(f"Note: {text}", file=sys.stderr)
