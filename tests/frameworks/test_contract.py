"""One contract, every framework: each registered `Framework` keeps the invariants written in
`tfperf/frameworks/_base.py`, checked on a small real pipeline built from data the test makes.

A new framework adds its `Case` (its pipeline files, in its own idiom) to `CASES`; the test
fails until it does, so no implementation goes unchecked. `tests/frameworks/fake_python.py`, a
framework shaped like the PyTorch DataLoader (process workers, no stage graph, no call sites),
is registered for these tests too, to keep the interface honest about that shape.
"""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.frameworks.fake_python import MARKER
from tfperf import frameworks
from tfperf.errors import PipelineFileError
from tfperf.frameworks import (
    CallSites,
    Framework,
    Input,
    ProfileRequest,
    Service,
    StageNode,
    StrategyKind,
    Workers,
    _registry,
)
from tfperf.measure import Progress
from tfperf.results import Phase, ProfileResult
from tfperf.results.discovery import Discovery
from tfperf.results.stages import StageKind


@dataclasses.dataclass(frozen=True)
class Case:
    """What the contract needs from one framework, written in that framework's idiom.

    Attributes:
        modules: the modules that are the framework (none may load with the registry).
        pipeline: a pipeline file that reads its knobs, over data it makes itself.
        plain: a plain file whose input calls carry literal values (call-site discovery).
        options: knobs that are input options, to apply and read back.
        has_stages: whether the framework recovers a stage graph.
    """

    modules: tuple[str, ...]
    pipeline: str
    plain: str
    options: dict[str, object]
    has_stages: bool


TENSORFLOW = Case(
    modules=("tensorflow", "keras"),
    pipeline="""
        import keras
        import numpy as np
        import tensorflow as tf

        BASELINE = {"batch_size": 4, "num_parallel_calls": 1, "prefetch": 1}

        def make_dataset(knobs):
            x = np.arange(48, dtype="float32").reshape(24, 2)
            y = np.zeros((24, 1), "float32")
            ds = tf.data.Dataset.from_tensor_slices((x, y))
            ds = ds.map(lambda a, b: (a * 2.0, b), num_parallel_calls=knobs.num_parallel_calls)
            return ds.batch(knobs.batch_size).prefetch(knobs.prefetch)

        def make_model(knobs):
            model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
            model.compile(optimizer="sgd", loss="mse")
            return model
    """,
    plain="""
        import keras
        import numpy as np
        import tensorflow as tf

        def make_dataset():
            x = np.ones((16, 2), "float32")
            ds = tf.data.Dataset.from_tensor_slices((x, x[:, :1]))
            ds = ds.map(lambda a, b: (a + 1.0, b), num_parallel_calls=2)
            return ds.batch(4).prefetch(1)

        def make_model():
            model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
            model.compile(optimizer="sgd", loss="mse")
            return model
    """,
    options={"deterministic": False, "private_threadpool_size": 2},
    has_stages=True,
)

TORCH = Case(
    modules=("torch",),
    pipeline="""
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        BASELINE = {"batch_size": 4, "num_workers": 0}

        def make_loader(knobs):
            x = torch.arange(48, dtype=torch.float32).reshape(24, 2)
            return DataLoader(TensorDataset(x, x[:, :1]), batch_size=knobs.batch_size)

        def make_train_step(knobs):
            model = torch.nn.Linear(2, 1)
            return lambda batch: torch.nn.functional.mse_loss(model(batch[0]), batch[1])
    """,
    # A DataLoader's literal values live in a training script's own loop.
    plain="""
        import torch
        from torch.utils.data import DataLoader

        def main():
            loader = DataLoader(torch.ones(16, 2), batch_size=4, num_workers=0)
            for batch in loader:
                torch.sum(batch)

        if __name__ == "__main__":
            main()
    """,
    options={"num_workers": 1, "persistent_workers": True},
    has_stages=False,
)

FAKE_PYTHON = Case(
    modules=(),
    pipeline=f"""
        {MARKER}
        BASELINE = {{"batch_size": 4}}

        def make_dataset(knobs):
            values = list(range(24))
            return [values[i : i + knobs.batch_size] for i in range(0, 24, knobs.batch_size)]

        def make_train_step(knobs):
            return lambda batch: sum(batch)
    """,
    plain=f"""
        {MARKER}
        def make_dataset():
            return [[1, 2], [3, 4]]

        def make_train_step():
            return sum
    """,
    options={"deterministic": False},
    has_stages=False,
)

#: The registered frameworks' cases.
CASES = {"tensorflow": TENSORFLOW, "torch": TORCH}
#: Frameworks registered for this test only, with the module that defines each.
TEST_ONLY = {"fake-python": ("tests.frameworks.fake_python", FAKE_PYTHON)}
ALL_CASES = {**CASES, **{name: case for name, (_, case) in TEST_ONLY.items()}}
#: A file written for no framework: nobody claims it.
FOREIGN = "import json\n\ndef make_dataset():\n    return json.loads('[1, 2]')\n"


def test_every_registered_framework_has_a_case() -> None:
    assert sorted(CASES) == sorted(frameworks.names())


def test_every_implementation_package_is_registered() -> None:
    """A subpackage of `tfperf/frameworks/` is an implementation only once the registry names it."""
    folder = Path(frameworks.__file__).parent
    packages = {path.parent.name for path in folder.glob("*/__init__.py")}
    assert packages == set(frameworks.names())


@pytest.fixture(params=sorted(ALL_CASES))
def name(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    modules = {name: module for name, (module, _) in TEST_ONLY.items()}
    monkeypatch.setattr(_registry, "IMPLEMENTATIONS", {**_registry.IMPLEMENTATIONS, **modules})
    return str(request.param)


@pytest.fixture
def framework(name: str) -> Framework:
    for module in ALL_CASES[name].modules:
        pytest.importorskip(module)  # PyTorch is an extra: `pip install tfperf[torch]`
    framework = frameworks.get(name)
    framework.start()
    return framework


def _write(folder: Path, source: str, file: str) -> Path:
    path = folder / file
    path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    return path


def test_the_registry_loads_no_framework(name: str) -> None:
    """Invariant 1: `get` and `claims` import no framework."""
    modules = ALL_CASES[name].modules
    registered = {name: module for name, (module, _) in TEST_ONLY.items()}
    code = (
        "import sys\n"
        "from tfperf import frameworks\n"
        "from tfperf.frameworks import _registry\n"
        f"_registry.IMPLEMENTATIONS.update({registered!r})\n"
        f"framework = frameworks.get({name!r})\n"
        "framework.claims('import os')\n"
        f"print(sorted(m for m in {modules!r} if m in sys.modules))\n"
    )
    root = Path(__file__).resolve().parents[2]  # so the test-only framework imports
    command = [sys.executable, "-c", code]
    done = subprocess.run(command, capture_output=True, text=True, check=True, cwd=root)
    assert done.stdout.strip() == "[]"


def test_describes_itself(name: str) -> None:
    framework = frameworks.get(name)
    assert isinstance(framework, Framework)
    assert framework.name == name
    assert isinstance(framework.workers, Workers)
    assert isinstance(framework.hook, str) and framework.hook
    assert frameworks.get(name) is framework


def test_remote_workers_are_a_service_or_none(name: str) -> None:
    """`service()` is None (the default) or implements `Service`, without importing a
    framework."""
    service = frameworks.get(name).service()
    assert service is None or isinstance(service, Service)


def test_an_unknown_name_says_which_exist() -> None:
    with pytest.raises(ValueError, match=r"no framework is named 'caffe'; the frameworks are \["):
        frameworks.get("caffe")


def test_claims_its_own_files_from_source_alone(name: str, tmp_path: Path) -> None:
    """Invariant 2: claiming reads text; a file that does not parse is not claimed."""
    framework = frameworks.get(name)
    case = ALL_CASES[name]
    assert framework.claims(textwrap.dedent(case.pipeline))
    assert framework.claims(textwrap.dedent(case.plain))
    assert not framework.claims(FOREIGN)
    assert not framework.claims("def broken(:\n")
    assert frameworks.detect(_write(tmp_path, case.pipeline, "pipeline.py")) is framework


def test_build_gives_fresh_passes_a_step_and_a_clock(
    name: str, framework: Framework, tmp_path: Path
) -> None:
    """Invariant 3: each `batches()` is a new pass; `sync` finishes the step's work."""
    pipeline = framework.load(_write(tmp_path, ALL_CASES[name].pipeline, "pipeline.py"))
    built = framework.build(pipeline, pipeline.baseline)

    assert isinstance(built, Input)
    first, second = list(built.batches()), list(built.batches())
    assert len(first) == len(second) > 0
    if built.epoch_steps is not None:
        assert built.epoch_steps == len(first)
    assert built.sync(built.step(first[0])) is None
    assert isinstance(built.element, str) and built.element
    assert built.discovery is None  # a file that reads its knobs has no call sites


def test_stages_run_source_to_output(name: str, framework: Framework, tmp_path: Path) -> None:
    """Invariant 4: a list from source to output, or None without a stage graph."""
    pipeline = framework.load(_write(tmp_path, ALL_CASES[name].pipeline, "pipeline.py"))
    stages = framework.stages(framework.build(pipeline, pipeline.baseline))

    if not ALL_CASES[name].has_stages:
        assert stages is None
        return
    assert stages is not None and stages
    assert all(isinstance(stage, StageNode) for stage in stages)
    assert [stage.index for stage in stages] == list(range(len(stages)))
    assert stages[0].kind is StageKind.SOURCE
    assert all(isinstance(stage.kind, StageKind) for stage in stages)


def test_options_read_back_as_applied(name: str, framework: Framework, tmp_path: Path) -> None:
    """Invariant 5: what `apply_options` sets, `read_options` reads; applying twice is stable."""
    case = ALL_CASES[name]
    pipeline = framework.load(_write(tmp_path, case.pipeline, "pipeline.py"))
    knobs = pipeline.baseline.replace(**case.options)
    built = framework.build(pipeline, knobs)

    assert dict(built.options) == framework.read_options(built.native)
    read = framework.read_options(built.native)
    assert {key: read[key] for key in case.options} == case.options
    again = framework.apply_options(built.native, knobs)
    assert framework.read_options(again) == read


def test_call_sites_are_found_and_patched(name: str, framework: Framework, tmp_path: Path) -> None:
    """Invariant 6: `sites()` finds the literal values a plain file wrote, and patches them."""
    sites = framework.sites()
    if sites is None:
        return
    assert isinstance(sites, CallSites)
    path = _write(tmp_path, ALL_CASES[name].plain, "plain.py")
    pipeline = framework.load(path)
    discovery = sites.find(pipeline)

    assert isinstance(discovery, Discovery) and discovery.sites
    chosen = discovery.sites[0]
    value = (chosen.value or 1) + 1
    before = pipeline.baseline.to_dict()
    patch = sites.patch(
        tmp_path, discovery, before, {**before, "sites": {chosen.name: value}}, script=False
    )
    assert patch.diff
    assert path.read_text(encoding="utf-8") == textwrap.dedent(ALL_CASES[name].plain).lstrip()


def test_the_import_guard_lets_a_quiet_file_load(
    name: str, framework: Framework, tmp_path: Path
) -> None:
    """Invariant 7, its quiet half: a file that does not train loads the same under the guard."""
    path = _write(tmp_path, ALL_CASES[name].pipeline, "pipeline.py")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    with framework.import_guard(tree, path, path.name):
        pipeline = framework.load(path)
    assert pipeline.path == path


#: A value other than its default for each request field a framework may leave unhonoured.
UNHONOURED = {
    "analyse_stages": True,
    "stage_seconds": 0.1,
    "epoch_steps": 7,
    "strategy": StrategyKind.MIRRORED,
    "step_time_s": 0.01,
}


def test_the_driver_measures_the_phases_and_refuses_what_is_not_honoured(
    name: str, framework: Framework, tmp_path: Path
) -> None:
    """`profile` runs `tfperf.measure.drive`: the three phases as the request asks (the
    end-to-end one alone, or without the compute-only one, when asked), and an option the
    framework does not honour (`Framework.honours`) refused by name."""
    pipeline = framework.load(_write(tmp_path, ALL_CASES[name].pipeline, "pipeline.py"))
    heard: list[Progress] = []
    request = ProfileRequest(steps=3, warmup=1, budget_s=60.0, progress=heard.append)
    result = framework.profile(pipeline, pipeline.baseline, request)

    assert isinstance(result, ProfileResult)
    assert [phase.phase for phase in result.phases()] == list(Phase)
    assert all(phase.steps >= 3 for phase in result.phases())
    assert result.budget_s == 60.0 and {progress.phase for progress in heard} == set(Phase)
    alone = framework.profile(
        pipeline, None, dataclasses.replace(request, end_to_end_only=True, progress=None)
    )
    assert [phase.phase for phase in alone.phases()] == [Phase.END_TO_END]
    known = framework.profile(
        pipeline, None, dataclasses.replace(request, compute_known=True, progress=None)
    )
    assert [phase.phase for phase in known.phases()] == [Phase.END_TO_END, Phase.PIPELINE_ONLY]
    fields = {field.name for field in dataclasses.fields(ProfileRequest)}
    assert set(UNHONOURED) | Framework.honours == fields
    measured = len(heard)
    for field in set(UNHONOURED) - framework.honours:
        asked = dataclasses.replace(request, **{field: UNHONOURED[field]})
        with pytest.raises(PipelineFileError, match=rf"pipeline does not honour {field}\b"):
            framework.profile(pipeline, None, asked)
    assert len(heard) == measured  # refused before anything ran
