"""The PyTorch framework: what it claims, how it applies a DataLoader's knobs, what it searches
and the references a study of it measures. Real DataLoaders, with real workers where it counts."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.frameworks.torch import pipelines
from tfperf import frameworks
from tfperf.errors import PipelineFileError
from tfperf.hardware import Machine
from tfperf.knobs import Knobs, framework_knobs
from tfperf.knobs.choices import StartMethod
from tfperf.results.tune import Reference
from tfperf.tuner._references import References
from tfperf.tuner._search import build_space, default_space

torch = pytest.importorskip("torch")

from tfperf.frameworks.torch import _torch  # noqa: E402 (after the skip: it needs torch)

MACHINE = Machine(
    cpu_count=2, total_ram_bytes=2**34, available_ram_bytes=2**33, gpu_names=(), cpu_bf16=False
)


def test_claims_files_that_build_a_dataloader_or_use_torch_without_tensorflow():
    torch_file = textwrap.dedent(pipelines.BLOCKING)
    framework = frameworks.get("torch")
    assert framework.claims(torch_file)
    assert framework.claims("import torch\nloader = torch.utils.data.DataLoader(range(4))\n")
    assert framework.claims("import torch\nx = torch.ones(2)\n")  # its loader built elsewhere
    assert not framework.claims("import torch\nimport tensorflow as tf\nx = torch.ones(2)\n")
    assert not framework.claims("import tensorflow as tf\ndef make_dataset(knobs): ...\n")
    assert frameworks.detect_source(torch_file).name == "torch"
    assert frameworks.detect_source("import tensorflow as tf\n").name == "tensorflow"


def test_knobs_are_applied_by_making_the_loader_again_and_read_back():
    from torch.utils.data import DataLoader

    loader = DataLoader(list(range(10)), batch_size=3, shuffle=True, drop_last=True)
    knobs = Knobs(num_workers=2, prefetch_factor=4, persistent_workers=True)
    rebuilt = _torch.rebuild(loader, knobs)

    assert rebuilt is not loader and rebuilt.sampler is loader.sampler
    assert (rebuilt.batch_size, rebuilt.drop_last) == (3, True)
    options = _torch.loader_options(rebuilt)
    assert options["num_workers"] == 2 and options["prefetch_factor"] == 4
    assert options["persistent_workers"] is True
    assert _torch.loader_options(_torch.rebuild(rebuilt, knobs)) == options
    assert _torch.rebuild(loader, Knobs()) is loader  # nothing set: the loader as written


def test_worker_only_arguments_are_dropped_without_workers():
    from torch.utils.data import DataLoader

    knobs = Knobs(num_workers=0, prefetch_factor=4, persistent_workers=True)
    options = _torch.loader_options(_torch.rebuild(DataLoader(list(range(4))), knobs))
    assert options["num_workers"] == 0 and options["prefetch_factor"] is None
    assert options["persistent_workers"] is False


def test_in_order_and_the_start_method_follow_the_installed_torch():
    """Pins the version-dependent API `_torch` touches: `in_order` exists from torch 2.6."""
    from torch.utils.data import DataLoader

    loader = _torch.rebuild(
        DataLoader(list(range(4))),
        Knobs(num_workers=1, in_order=False, worker_start_method="fork"),
    )
    options = _torch.loader_options(loader)
    assert options["worker_start_method"] is StartMethod.FORK
    assert options["in_order"] is (False if _torch.accepts("in_order") else None)


def test_a_search_holds_only_its_frameworks_knobs():
    torch_space = default_space(Knobs(), MACHINE, framework="torch")
    tf_space = default_space(Knobs(), MACHINE)
    assert set(torch_space) == set(framework_knobs("torch"))
    assert "num_workers" not in tf_space and "num_parallel_calls" not in torch_space
    assert {"batch_size", "mixed_precision"} <= set(tf_space) & set(torch_space)
    assert 32 in torch_space["num_workers"].values  # type: ignore[union-attr]


def test_a_study_measures_pytorchs_rule_beside_the_baseline():
    baseline = Knobs(batch_size=4, num_workers=0)
    space = build_space(baseline, MACHINE, {}, {}, framework="torch")
    references = References(baseline, MACHINE, space, list(space), frameworks.get("torch"))
    assert references.knobs == {
        Reference.BASELINE.value: baseline,
        Reference.RULE.value: baseline.replace(num_workers=2),
    }


def test_a_loader_function_that_returns_no_dataloader_is_named(tmp_path: Path):
    source = pipelines.BLOCKING.replace(
        "return DataLoader(Waits(), batch_size=knobs.batch_size)", "return [1, 2]"
    )
    framework = frameworks.get("torch")
    pipeline = framework.load(pipelines.write(tmp_path, source))
    with pytest.raises(PipelineFileError, match=r"`make_loader` returned a list, not a torch"):
        framework.build(pipeline, pipeline.baseline)


def test_workers_started_as_the_process_starts_them_are_checked_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A loader with no start method of its own starts its workers as the process does: after
    `set_start_method("spawn")`, or on Python 3.14's Linux default, forkserver. Those workers
    import the dataset's class again, which a pipeline file's private module cannot offer."""
    import multiprocessing

    framework = frameworks.get("torch")
    pipeline = framework.load(pipelines.write(tmp_path, pipelines.BLOCKING))
    knobs = pipeline.baseline.replace(num_workers=1)
    framework.build(pipeline, knobs)  # fork: the workers inherit the class
    monkeypatch.setattr(multiprocessing, "get_start_method", lambda allow_none=False: None)
    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["forkserver"])
    with pytest.raises(PipelineFileError, match=r"start method, 'forkserver' \(set_start_"):
        framework.build(pipeline, knobs)


def test_a_file_without_make_loader_says_what_tfperf_calls(tmp_path: Path):
    source = pipelines.BLOCKING.replace("def make_loader(", "def make_loaders(")
    with pytest.raises(PipelineFileError, match=r"calls `make_loader\(knobs\)` to build the Data"):
        frameworks.get("torch").load(pipelines.write(tmp_path, source))


def test_a_scripts_rule_and_estimate_set_its_dataloader_sites():
    from tfperf.frameworks.torch._framework import _with_workers

    sites = {"DataLoader@t.py:3.num_workers": 0, "DataLoader@t.py:3.persistent_workers": None}
    baseline = Knobs.from_mapping({"sites": sites})
    rule = frameworks.get("torch").rule(baseline, 2)
    assert rule is not None and rule.sites["DataLoader@t.py:3.num_workers"] == 2
    assert rule.num_workers is None  # a script's DataLoader takes its values at its call
    estimate = _with_workers(baseline, 8, persistent=True)
    assert dict(estimate.sites) == {
        "DataLoader@t.py:3.num_workers": 8,
        "DataLoader@t.py:3.persistent_workers": 1,
    }


def test_a_torch_recommendation_pastes_as_a_dataloader_call():
    from tfperf.report._snippets import baseline_snippet, code_snippet

    knobs = Knobs(batch_size=64, num_workers=8, persistent_workers=True, torch_threads=1)
    assert code_snippet(knobs.to_dict(), "torch") == (
        "loader = DataLoader(dataset, batch_size=64, num_workers=8, persistent_workers=True)\n"
        "torch.set_num_threads(1)"
    )
    pasted = baseline_snippet(knobs.to_dict(), "torch")
    assert "'num_workers': 8" in pasted and "num_parallel_calls" not in pasted


def _threads_case(
    one_thread: float | None, default_cores: float, threads: int | None = None, workers: int = 2
):
    """A profile of a loader with `workers` workers whose step computes 32,000 examples/s under
    the trainer's default threads, those keeping `default_cores` busy, and `one_thread`
    examples/s on one thread, against a limit of 1,000 examples/s; and its baseline."""
    from tests.fakes.trials import fake_result
    from tfperf.results import CpuUsage, Limit, LimitBound, TimedValue
    from tfperf.results.stages import LoaderReport

    baseline = Knobs(batch_size=32, num_workers=workers, torch_threads=threads)
    result = fake_result(baseline, wait_s=0.01, compute_s=0.001)
    compute = result.compute_only
    assert compute is not None and compute.examples_per_sec == pytest.approx(32_000)
    percent = default_cores * 100
    samples = [TimedValue(record.start_s, percent) for record in compute.records]
    result.cpu = CpuUsage(percent, percent, 2, samples)
    result.limit = Limit(1_000, LimitBound.PARALLEL_STAGE, "the workers bind", [])
    result.loader = LoaderReport(
        workers=workers, persistent_workers=False, workers_estimate=8,
        one_thread_examples_per_sec=one_thread,
    )  # fmt: skip
    return result, baseline


def _estimated(one_thread: float | None, default_cores: float, threads: int | None = None):
    """`trainer_threads` of `_threads_case`, and the threads its estimate runs."""
    from tfperf.frameworks.torch._limit import trainer_threads

    result, baseline = _threads_case(one_thread, default_cores, threads)
    estimate = frameworks.get("torch").estimate(result, baseline)
    assert result.loader is not None and estimate is not None
    assert estimate.knobs.num_workers == 8
    return trainer_threads(result, result.loader), estimate.knobs.torch_threads


def test_the_estimate_runs_the_trainer_on_one_thread_only_where_that_frees_cores():
    # Default threads keep 2 cores busy (62.5 µs per example); one thread costs 50 µs and
    # runs 20x the limit: it frees CPU for the workers at no cost in rate.
    assert _estimated(20_000, 2.0) == (1, 1)
    # One thread under twice the limit (`HEADROOM`): the step could bind; threads are kept.
    assert _estimated(1_500, 2.0) == (None, None)
    # Default threads cost no more CPU than one (31 µs against 50 µs): nothing to free.
    assert _estimated(20_000, 1.0) == (None, None)
    # Not measured (the knobs set the threads): nothing is decided for the user.
    assert _estimated(None, 2.0) == (None, None)
    # The user's own thread count stands even where one thread would free cores.
    assert _estimated(20_000, 2.0, threads=2) == (1, 2)


def test_the_threads_finding_stands_only_where_one_thread_frees_contended_cores():
    from tfperf.frameworks.torch._limit import threads_finding

    result, _ = _threads_case(20_000, 2.0)
    assert result.loader is not None
    result.compute_slowdown = 3.0  # steps compute 3x slower end to end: the cores contend
    finding = threads_finding(result, result.loader)
    assert finding is not None and finding.rule == "trainer-threads"
    assert finding.text == (
        "The train step runs on torch's default threads, one per core, which spin on the cores "
        "the workers need: it costs 62.5 µs CPU per example there, against 50 µs on one "
        "thread, where alone it still runs 20,000 examples/s, 20x the limit."
    )
    assert "torch.set_num_threads(1)" in finding.fix
    # (1 - wait) of the step computes, 2/3 of that is the slowdown, 1/5 of its CPU is saved.
    assert finding.weight == pytest.approx((1 - result.input_wait_fraction) * 2 / 3 * 0.2)
    result.compute_slowdown = 1.1  # no contention: nothing to relieve
    assert threads_finding(result, result.loader) is None
    result.compute_slowdown = 3.0
    result.knobs = {**result.knobs, "torch_threads": 2}  # the threads were set: not told
    assert threads_finding(result, result.loader) is None
    alone, _ = _threads_case(20_000, 2.0, workers=0)  # no workers: no cores to free
    alone.compute_slowdown = 3.0
    assert alone.loader is not None and threads_finding(alone, alone.loader) is None
    slow, _ = _threads_case(1_500, 2.0)  # one thread would bind: threads are kept
    assert slow.loader is not None
    slow.compute_slowdown = 3.0
    assert threads_finding(slow, slow.loader) is None


def test_a_script_with_its_own_make_loader_helper_is_run_not_imported():
    import ast

    torch_framework = frameworks.get("torch")

    def script(source: str) -> bool | None:
        return torch_framework.is_script(ast.parse(textwrap.dedent(source)))

    # Trains at its top level: importing it would train, whatever helpers it defines.
    assert script("""
        def make_loader():
            return DataLoader(data, num_workers=2)
        loader = make_loader()
        for x, y in loader:
            loss(x, y).backward()
    """)
    # The contract, its train step calling backward inside a function: a pipeline file.
    assert not script("""
        def make_loader(knobs):
            return DataLoader(data, batch_size=knobs.batch_size)
        def make_train_step(knobs):
            def step(batch):
                loss(batch).backward()
            return step
    """)
    # Part of the names, and a main() that trains: a script's helper, not the contract.
    assert script("""
        def make_loader():
            return DataLoader(data)
        def main():
            for x in make_loader():
                loss(x).backward()
        if __name__ == "__main__":
            main()
    """)
    # Part of the contract and no training: a broken pipeline file, told what is missing.
    assert not script("def make_loader(knobs):\n    return DataLoader(data)\n")
    assert script("loader = DataLoader(data)\n")  # none of the names
