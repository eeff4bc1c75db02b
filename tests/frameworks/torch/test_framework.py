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
