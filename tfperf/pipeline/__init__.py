"""A user's pipeline file or training script: loaded hygienically and checked against the
contract; a framework (`tfperf.frameworks`) builds it for knobs."""

from __future__ import annotations

from tfperf.pipeline._contract import (
    check_framework_knobs,
    defines_contract,
    function_place,
    strategy_function,
    takes_input_context,
    trains_anywhere,
    trains_on_import,
)
from tfperf.pipeline._loader import (
    PipelineFile,
    PipelineKind,
    check_source,
    load_pipeline,
)
from tfperf.pipeline._main import run_as_main
from tfperf.pipeline._sources import source_digest, user_sources

__all__ = [
    "PipelineFile",
    "PipelineKind",
    "check_framework_knobs",
    "check_source",
    "defines_contract",
    "function_place",
    "load_pipeline",
    "run_as_main",
    "source_digest",
    "strategy_function",
    "takes_input_context",
    "trains_anywhere",
    "trains_on_import",
    "user_sources",
]
