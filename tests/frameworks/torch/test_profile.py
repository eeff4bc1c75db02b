"""Profiling a DataLoader with real worker processes on tiny data: restarts in the framework's
words, items named by their line, the limit above every measured rate."""

from __future__ import annotations

from pathlib import Path

import pytest
from markupsafe import escape

from tests.frameworks.torch import pipelines
from tfperf import frameworks
from tfperf.report import render_profile_html
from tfperf.report._loader import loader_view
from tfperf.report._text import render_summary
from tfperf.results.stages import StageKind

pytest.importorskip("torch")


def test_a_blocking_loader_is_input_bound_and_names_its_items(tmp_path: Path):
    framework = frameworks.get("torch")
    pipeline = framework.load(pipelines.write(tmp_path))
    knobs = pipeline.baseline.replace(num_workers=2)
    result = framework.profile(pipeline, knobs, steps=12, warmup=1)

    loader = result.loader
    assert loader is not None and loader.workers == 2 and not loader.persistent_workers
    assert loader.item_function == "Waits.__getitem__"
    assert loader.item_where == "pipeline.py:13"
    assert loader.wall_s_per_item is not None and loader.cpu_s_per_item is not None
    assert loader.wall_s_per_item >= 0.001 > loader.cpu_s_per_item
    assert loader.workers_estimate is not None and loader.workers_estimate >= 1
    assert loader.host_ram_peak_bytes and loader.workers_ram_peak_bytes is not None
    # No CUDA here: no copy is timed and no GPU gets torch's allocator peak.
    assert loader.copy_s_per_batch is None and result.host_copy() is None
    assert all(gpu.torch_allocator_peak_bytes is None for gpu in result.gpus)
    # 6 batches per pass: every pass starts the workers again, the core's restart records.
    assert result.end_to_end.epochs_crossed >= 1
    assert result.restarts is not None and result.restarts.stage == "workers start"
    assert result.restarts.stage_kind is StageKind.WORKERS
    assert result.knobs["num_workers"] == 2 and "num_parallel_calls" not in result.knobs
    assert result.limit is not None
    assert result.limit.examples_per_sec >= result.end_to_end.examples_per_sec
    # The report's DataLoader block: the same rows in the terminal and the HTML.
    page, text = render_profile_html(result), render_summary(result)
    rows = loader_view(loader).rows
    assert {label for label, _ in rows} >= {"first batch", "items", "workers estimate"}
    for label, words in rows:
        assert f"  {label}: {words}" in text
        assert f"<tr><th>{escape(label)}</th><td>{escape(words)}</td></tr>" in page


def test_persistent_workers_keep_one_iterator_yet_every_pass_restarts(tmp_path: Path):
    framework = frameworks.get("torch")
    pipeline = framework.load(pipelines.write(tmp_path))
    knobs = pipeline.baseline.replace(num_workers=1, persistent_workers=True)
    built = framework.build(pipeline, knobs)

    first, second = list(built.batches()), list(built.batches())
    assert len(first) == len(second) == built.epoch_steps == 6
