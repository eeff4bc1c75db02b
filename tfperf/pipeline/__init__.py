"""A user's pipeline file or training script: loaded hygienically, checked, built for knobs."""

from __future__ import annotations

from tfperf.pipeline._build import (
    Built,
    build,
    build_dataset,
    build_parts,
    found_sites,
    raw_dataset,
)
from tfperf.pipeline._contract import (
    strategy_function,
    takes_input_context,
)
from tfperf.pipeline._loader import (
    PipelineFile,
    PipelineKind,
    check_source,
    load_pipeline,
)
from tfperf.pipeline._sources import source_digest, user_sources

__all__ = [
    "Built",
    "PipelineFile",
    "PipelineKind",
    "build",
    "build_dataset",
    "build_parts",
    "check_source",
    "found_sites",
    "load_pipeline",
    "raw_dataset",
    "source_digest",
    "strategy_function",
    "takes_input_context",
    "user_sources",
]
