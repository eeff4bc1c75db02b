"""The call sites of a plain file or script as written, and the stage that limits it.

This runs before a search (in a child process, `tfperf.trials`): the build records the sites,
then each stage is measured alone to name the slowest and the sites in it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tfperf.frameworks.tensorflow._build import build_parts, found_sites, raw_dataset
from tfperf.frameworks.tensorflow._chain import recover_chain
from tfperf.frameworks.tensorflow._recording import Recorder
from tfperf.frameworks.tensorflow._stages import analyse_stages
from tfperf.frameworks.tensorflow._tf import apply_options
from tfperf.pipeline import PipelineFile, PipelineKind
from tfperf.results.discovery import Discovery, SlowStage


def discover_sites(pipeline: PipelineFile, *, measure_stages: bool = False) -> Discovery:
    """The call sites of a plain file or script, as its code is written.

    A plain file's `make_dataset()` runs; a script runs up to `fit` (its model is built too). Only
    calls that build the measured dataset count: a validation set built beside it has nothing to
    tune. A file that reads its knobs has no sites. With `measure_stages`, each stage is measured
    alone (`_stages`, a few seconds) to name the one that limits the pipeline as
    written, and the sites in it.
    """
    if pipeline.kind is PipelineKind.KNOBS:
        return Discovery()
    knobs = pipeline.baseline.replace(sites={})
    if pipeline.kind is PipelineKind.SCRIPT:
        dataset, _, _, recorder = build_parts(pipeline, knobs)
    else:
        dataset, recorder = raw_dataset(pipeline, knobs)
    discovery = found_sites(recorder, dataset, pipeline) or Discovery()
    if measure_stages and recorder is not None:
        slowest = _slowest(apply_options(dataset, knobs), recorder)
        discovery = dataclasses.replace(discovery, slowest=slowest)
    return discovery


def _slowest(dataset: Any, recorder: Recorder) -> SlowStage | None:
    stat = analyse_stages(dataset).bottleneck
    if stat is None:
        return None
    node = recover_chain(dataset).stages[stat.index].dataset
    return SlowStage(stat.label, stat.location, stat.added_s_per_example, recorder.sites_of(node))
