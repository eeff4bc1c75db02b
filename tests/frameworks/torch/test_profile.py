"""Profiling a DataLoader with real worker processes on tiny data: restarts in the framework's
words, items named by their line, the limit above every measured rate."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from markupsafe import escape

from tests.frameworks.torch import pipelines
from tfperf import frameworks
from tfperf.frameworks import ProfileRequest
from tfperf.frameworks.torch._limit import _explanation as explanation
from tfperf.frameworks.torch._limit import loader_limit, most_workers
from tfperf.hardware import detect_machine
from tfperf.report import render_answer, render_profile_html
from tfperf.report._loader import loader_statements, loader_text, loader_view
from tfperf.report._text import render_summary
from tfperf.results import LimitBound, LimitTerm, ProfileResult
from tfperf.results.stages import StageKind

pytest.importorskip("torch")


def _profiled(tmp_path: Path, source: str) -> ProfileResult:
    """`source` written as a pipeline file, profiled as written for 6 steps."""
    framework = frameworks.get("torch")
    pipeline = framework.load(pipelines.write(tmp_path, source))
    return framework.profile(pipeline, request=ProfileRequest(steps=6))


def test_a_blocking_loader_is_input_bound_and_names_its_items(tmp_path: Path):
    framework = frameworks.get("torch")
    pipeline = framework.load(pipelines.write(tmp_path))
    knobs = pipeline.baseline.replace(num_workers=2)
    result = framework.profile(pipeline, knobs, ProfileRequest(steps=12, warmup=1))

    loader = result.loader
    assert loader is not None and loader.workers == 2 and not loader.persistent_workers
    assert loader.item_function == "Waits.__getitem__"
    assert loader.item_where == "pipeline.py:13"
    assert loader.wall_s_per_item is not None and loader.cpu_s_per_item is not None
    assert loader.wall_s_per_item >= 0.001 > loader.cpu_s_per_item
    assert loader.workers_estimate is not None and loader.workers_estimate >= 1
    # The trainer's threads were left to torch: the step was also timed on one thread.
    assert loader.one_thread_examples_per_sec is not None and loader.one_thread_examples_per_sec > 0
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
    # Items that wait: the most workers a search tries, one item each, bound the rate too.
    workers = [t for t in result.limit.terms if t.bound_by is LimitBound.PARALLEL_STAGE]
    assert len(workers) == 1 and workers[0].stage_label == "Waits.__getitem__"
    most = most_workers(detect_machine().cpu_count)
    assert workers[0].examples_per_sec == pytest.approx(most / loader.load_wall_s_per_item)
    assert workers[0].detail.startswith(f"{most} workers ÷ ")
    smallest = min(t.examples_per_sec for t in result.limit.terms)
    assert result.limit.examples_per_sec == max(smallest, result.end_to_end.examples_per_sec)
    slow = loader_limit(result, dataclasses.replace(loader, wall_s_per_item=0.5), 2)
    assert slow is not None and slow.bound_by is LimitBound.PARALLEL_STAGE
    assert slow.explanation.startswith(
        "The workers bind: 32 workers ÷ 500 ms wall per item (with its share of collate), "
        "the most a search tries here"
    )
    assert "`Waits.__getitem__` spends most of its wall time waiting" in slow.explanation
    # The workers' term binding items that compute most of their time (the step's CPU not
    # measured, so no cpu term): no sentence says they wait.
    busy = dataclasses.replace(loader, wall_s_per_item=0.5, cpu_s_per_item=0.4)
    words = explanation(slow.terms[-1], busy, slow.examples_per_sec)
    assert "waiting" not in words and "`Waits.__getitem__`" not in words
    assert words.endswith("(num_workers in SEARCH_SPACE) would lift it while the cores have room.")
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


#: A stream that every worker reads whole: no `get_worker_info()` in `__iter__`.
UNSHARDED = """
    import torch
    from torch.utils.data import DataLoader, IterableDataset

    BASELINE = {"batch_size": 4, "num_workers": 0}


    class Lines(IterableDataset):
        def __iter__(self):
            return (torch.full((2,), float(i)) for i in range(24))


    def make_loader(knobs):
        return DataLoader(Lines(), batch_size=knobs.batch_size)


    def make_train_step(knobs):
        return lambda batch: batch.sum()
"""


def test_a_stream_every_worker_reads_whole_is_named_in_the_profile(tmp_path: Path):
    framework = frameworks.get("torch")
    pipeline = framework.load(pipelines.write(tmp_path, UNSHARDED))
    result = framework.profile(
        pipeline, pipeline.baseline.replace(num_workers=2), ProfileRequest(steps=6)
    )

    loader = result.loader
    assert loader is not None and loader.pass_check is not None
    assert loader.pass_check.ratio == 2.0 and loader.pass_check.changes_data
    (statement,) = [s for s in loader_statements(loader) if "IterableDataset" in s]
    assert statement.startswith("`Lines` is an IterableDataset that every worker reads whole")
    assert "num_workers=2" in statement and "get_worker_info()" in statement
    # The short answer leads with it: every rate above it counts duplicates.
    first = result.findings[0]
    assert (first.rule, first.origin) == ("changed-data", "torch")
    answer = render_answer(result)
    assert f"1. [fix] {loader.pass_check.text()}" in answer and loader.pass_check.fix() in answer
    # The terminal and the HTML say it in the DataLoader block; the JSON keeps it.
    assert ("examples per pass", statement) in loader_view(loader).rows
    assert statement in render_summary(result)
    assert escape(statement) in render_profile_html(result)
    again = ProfileResult.from_json(result.to_json()).loader
    assert again is not None and again.pass_check == loader.pass_check
    assert again.worker_memory == loader.worker_memory is not None


def test_without_workers_nothing_is_checked_and_old_results_still_load(tmp_path: Path):
    result = _profiled(tmp_path, UNSHARDED)

    assert result.loader is not None and result.loader.pass_check is None
    assert result.loader.worker_memory is None and loader_statements(result.loader) == ()
    saved = json.loads(result.to_json())
    for key in ("pass_check", "worker_memory"):
        del saved["loader"][key]  # as written before these fields existed
    loaded = ProfileResult.from_json(json.dumps(saved)).loader
    assert loaded is not None and loaded.pass_check is None and loaded.worker_memory is None


def test_a_check_that_fails_still_leaves_a_batch_for_what_needs_one():
    from torch.utils.data import DataLoader, IterableDataset, get_worker_info

    from tfperf.frameworks.torch._runner import _checked_pass

    class WorkersOnly(IterableDataset):  # type: ignore[misc]
        """Refuses to be read in the trainer, as a stream that needs its worker's shard."""

        def __iter__(self):
            if get_worker_info() is None:
                raise RuntimeError("read me in a worker")
            return iter([torch.zeros(2)] * 4)

    torch = pytest.importorskip("torch")
    loader = DataLoader(WorkersOnly(), batch_size=2, num_workers=1)
    checked = _checked_pass(loader, needs_batch=True)
    assert checked is not None and checked.pass_check is None and checked.memory is None
    assert checked.first_batch is not None
    assert _checked_pass(loader, needs_batch=False) is None


#: Each item is a batch of 8 examples read in one request: the loader batches nothing.
PREBATCHED = """
    import time

    import torch
    from torch.utils.data import DataLoader, Dataset

    BASELINE = {"batch_size": 8, "num_workers": 0}


    class Requests(Dataset):
        def __len__(self):
            return 12

        def __getitem__(self, index):
            time.sleep(0.002)
            return torch.full((8, 2), float(index))


    def make_loader(knobs):
        return DataLoader(Requests(), batch_size=None)


    def make_train_step(knobs):
        return lambda batch: batch.sum()
"""


def test_an_item_that_is_a_batch_counts_its_examples_in_the_limit(tmp_path: Path):
    result = _profiled(tmp_path, PREBATCHED)
    loader, limit = result.loader, result.limit
    assert loader is not None and loader.examples_per_item == 8.0
    assert loader.wall_s_per_item is not None and limit is not None
    (workers,) = [t for t in limit.terms if t.bound_by is LimitBound.PARALLEL_STAGE]
    most = most_workers(detect_machine().cpu_count)
    assert loader.load_wall_s_per_item is not None
    assert workers.examples_per_sec == pytest.approx(most * 8 / loader.load_wall_s_per_item)
    assert workers.detail.endswith("ms wall per item of 8 examples (with its share of collate)")
    # A CPU bound the step spends most of is not lifted by cheaper items. The words are
    # those of items that outweigh their collate: measured, the two are a few µs each, and
    # which is the larger is the machine's noise.
    cpu = LimitTerm(LimitBound.CPU, 1000.0, "2 cores ÷ (0.001 ms item + 0.01 ms step CPU ...)")
    items = dataclasses.replace(loader, collate_cpu_s_per_batch=None)
    words = explanation(cpu, items, 1000.0, step_costs_more=True)
    assert "most of it the train step's" in words and "item cheaper" not in words
    assert "make each item cheaper" in explanation(cpu, items, 1000.0)


COSTLY_COLLATE = """
    import time

    import torch
    from torch.utils.data import DataLoader

    BASELINE = {"batch_size": 4, "num_workers": 0}


    def pad(items):
        end = time.thread_time() + 0.004  # 4 ms of CPU a batch: the items cost next to nothing
        while time.thread_time() < end:
            pass
        return torch.stack(items)


    def make_loader(knobs):
        return DataLoader([torch.ones(2)] * 64, batch_size=knobs.batch_size, collate_fn=pad)


    def make_train_step(knobs):
        return lambda batch: batch.sum()
"""


def test_a_collate_call_that_outweighs_the_items_is_counted_and_named(tmp_path: Path):
    result = _profiled(tmp_path, COSTLY_COLLATE)
    loader, limit = result.loader, result.limit
    assert loader is not None and limit is not None and loader.items_per_batch == 4
    assert loader.collate_function == "pad" and loader.collate_where == "pipeline.py:9"
    assert loader.collate_cpu_s_per_batch is not None and loader.collate_cpu_s_per_batch >= 0.004
    assert loader.collate_dominates
    load_cpu, item_cpu = loader.load_cpu_s_per_item, loader.cpu_s_per_item
    assert load_cpu is not None and item_cpu is not None and load_cpu >= 0.001 > item_cpu
    # The cores' term counts each item's share of the collate call: no more than 2 cores
    # can run 4 ms of it per 4 examples.
    (cpu,) = [t for t in limit.terms if t.bound_by is LimitBound.CPU]
    assert cpu.examples_per_sec <= detect_machine().cpu_count / 0.001
    assert "ms item and collate +" in cpu.detail
    advice = render_summary(result)
    text = loader_text(loader_view(loader))
    assert "CPU per batch of 4 in pad (pipeline.py:9)" in text, text
    # The collate computes, so it is named, unless this run's wall time was twice its CPU
    # (a machine busy enough to keep it off the cores): then the items are said to wait.
    if not loader.items_wait:
        assert "Each batch's `pad` (pipeline.py:9) takes" in advice
        assert "for 4 items of `list.__getitem__` at" in advice, advice
    else:
        assert "Each item of `list.__getitem__`" in advice, advice


BATCH_SAMPLER = """
    import time

    import torch
    from torch.utils.data import BatchSampler, DataLoader, SequentialSampler

    BASELINE = {"num_workers": 0}


    class Waits(torch.utils.data.Dataset):
        def __len__(self):
            return 32

        def __getitem__(self, index):
            time.sleep(0.001)
            return torch.ones(2)


    def make_loader(knobs):
        data = Waits()
        return DataLoader(data, batch_sampler=BatchSampler(SequentialSampler(data), 8, False))


    def make_train_step(knobs):
        return lambda batch: batch.sum()
"""


def test_a_batch_sampler_of_the_users_gathers_single_items(tmp_path: Path):
    # Under a batch_sampler the loader's batch_size is None, yet each index is one example:
    # an item is not a batch of 8, and the collate call gathers 8 items.
    result = _profiled(tmp_path, BATCH_SAMPLER)
    loader = result.loader
    assert loader is not None and loader.examples_per_item == 1.0
    assert loader.items_per_batch == 8
    text = loader_text(loader_view(loader))
    assert "per batch of 8 in default_collate" in text, text
