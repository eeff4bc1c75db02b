"""PyTorch's DataLoader behind `tfperf.frameworks.Framework`.

Pipelines are pipeline files (`make_loader(knobs)` returning a `DataLoader` and
`make_train_step(knobs)` returning the callable run on each batch); the loader's parallel work
runs in worker processes; a DataLoader has no stage graph, so `stages` is None and the
profile times its items instead. torch is imported inside the methods only.
"""

from __future__ import annotations

import ast
import logging
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from tfperf.frameworks import (
    CallSites,
    DeviceLayout,
    Framework,
    Input,
    Pipeline,
    ProfileRequest,
    StageNode,
    StrategyKind,
    Words,
    Workers,
)
from tfperf.frameworks.torch import _torch
from tfperf.frameworks.torch._build import build
from tfperf.frameworks.torch._limit import trainer_threads
from tfperf.frameworks.torch._runner import LoaderMeasurement, ScriptMeasurement
from tfperf.frameworks.torch._training import probe_one
from tfperf.kept import Writer
from tfperf.measure import drive
from tfperf.measure.training import probe_settings
from tfperf.pipeline import (
    PipelineFile,
    PipelineKind,
    load_pipeline,
    trains_anywhere,
    trains_on_import,
)
from tfperf.results.tune import Estimate
from tfperf.sites import callee

if TYPE_CHECKING:
    from tfperf.knobs import Knobs
    from tfperf.results import ProfileResult, TrainingRate

logger = logging.getLogger(__name__)


class Torch(Framework):
    """A `torch.utils.data.DataLoader` input and the file's own train step."""

    name: ClassVar[str] = "torch"
    workers: ClassVar[Workers] = Workers.PROCESSES
    hook: ClassVar[str] = "DataLoader.__iter__"
    input_function: ClassVar[str] = "make_loader"
    training_functions: ClassVar[tuple[tuple[str, str], ...]] = (
        ("make_train_step", "a callable that tfperf runs on each batch (one optimizer step)"),
    )
    # A DataLoader has no stage graph: the stage analysis finds no stages (its items are
    # timed instead). `strategy` and an emulated step (`step_time_s`) are tf.data's alone.
    honours = Framework.honours | {"analyse_stages", "stage_seconds", "epoch_steps"}
    stage_graph: ClassVar[bool] = False  # its items are timed instead (`_items`)
    preload: ClassVar[tuple[str, ...]] = ("torch",)
    writers: ClassVar[tuple[Writer, ...]] = (Writer("torch.save", "f"),)
    words: ClassVar[Words] = Words(
        name="PyTorch",
        pipeline="DataLoader",
        sites_found_while="script ran",
        oom_error="OutOfMemoryError",
        oom_marks=("out of memory", "OutOfMemoryError"),
        label="PyTorch DataLoader",
        script_stop="its first DataLoader pass",
        first_work="item (`__getitem__`, the worker start or collate_fn)",
    )

    def claims(self, source: str) -> bool:
        """A file that imports torch and defines `make_loader` or calls `DataLoader(...)`, or
        imports torch and no TensorFlow or Keras (a script whose loader is built elsewhere)."""
        tree = _tree(source)
        if tree is None:
            return False
        roots = _imported_roots(tree)
        if "torch" not in roots:
            return False
        return (
            bool(_defined(tree) & _INPUT_FUNCTIONS)
            or _builds_loader(tree)
            or not (roots & _TENSORFLOW)
        )

    def is_script(self, tree: ast.Module) -> bool | None:
        """Whether a file is a training script, run as `python train.py` (where tfperf's
        iterator stops it) rather than imported: importing a script would run whatever its
        top level does, a whole training loop included.

        - a `.backward()` in the file's top-level code trains on import: a script, whatever
          helpers it defines (its own `make_loader()`);
        - otherwise a file with a name only the contract uses (`make_train_step`,
          `BASELINE`, `SEARCH_SPACE`) is a pipeline file: whole with `make_loader`, else a
          broken one, whose message says what is missing;
        - otherwise a file with a helper a script may name so (`make_loader`, `make_model`)
          is a script where it calls `.backward()` anywhere (a `main()` that trains);
        - a file with none of them is a script.
        """
        if trains_on_import(tree, _TRAINING_CALLS):
            return True
        names = _defined(tree)
        if names & (_PIPELINE_NAMES - _HELPER_NAMES):
            return False
        if names & _HELPER_NAMES:
            return trains_anywhere(tree, _TRAINING_CALLS)
        return True

    def start(self, layout: DeviceLayout | None = None, *, owns_process: bool = False) -> None:
        _torch.import_torch()  # the device layout is tf.distribute's; a DataLoader has none

    def load(
        self, path: str | Path, argv: Sequence[str] = (), *, needs_step: bool = True
    ) -> PipelineFile:
        pipeline = load_pipeline(path, argv, needs_step=needs_step)
        logger.info("%s", self.announce(pipeline))
        return pipeline

    def announce(self, pipeline: Pipeline) -> str | None:
        kind = getattr(pipeline, "kind", None)
        what = "training script" if kind is PipelineKind.SCRIPT else "pipeline"
        return f"PyTorch DataLoader {what}: {pipeline.path.name}"

    def build(
        self, pipeline: Pipeline, knobs: Knobs, *, strategy: StrategyKind | None = None
    ) -> Input:
        built = build(_file(pipeline), knobs)
        loader = built.loader
        return Input(
            batches=lambda: iter(_torch.Passes(loader)),  # a new pass (and workers) each
            step=built.step,
            sync=_torch.synchronise,
            element=_element(loader),
            epoch_steps=_torch.epoch_steps(loader),
            options=self.read_options(loader),
            native=loader,
        )

    def stages(self, built: Input) -> list[StageNode] | None:
        return None  # a DataLoader has no stage graph: the profile times its items instead

    def apply_options(self, native: Any, knobs: Knobs) -> Any:
        return _torch.rebuild(native, knobs)

    def read_options(self, native: Any) -> dict[str, Any]:
        return _torch.loader_options(native)

    def profile(
        self, pipeline: Pipeline, knobs: Knobs | None = None, request: ProfileRequest | None = None
    ) -> ProfileResult:
        file = _file(pipeline)
        kind = ScriptMeasurement if file.kind is PipelineKind.SCRIPT else LoaderMeasurement
        return drive(kind(self, file, knobs, request))

    def probe_training(
        self, pipeline: Pipeline, knobs: Knobs, settings: Sequence[Mapping[str, Any]]
    ) -> list[TrainingRate]:
        file = _file(pipeline)  # a setting whose build or step fails is left out, warned of
        return probe_settings(settings, lambda s: probe_one(file, knobs.replace(**dict(s))))

    def sites(self) -> CallSites | None:
        from tfperf.frameworks.torch._sites import TorchSites

        return TorchSites()

    def out_of_memory(self, error: BaseException) -> bool:
        """A CUDA allocation refused: `torch.cuda.OutOfMemoryError`, or the `RuntimeError`
        older versions raise with "CUDA out of memory" in its message."""
        torch = sys.modules.get("torch")  # not loaded: none of its errors can be this one
        if torch is None:
            return False
        return isinstance(error, torch.cuda.OutOfMemoryError) or (
            isinstance(error, RuntimeError) and "CUDA out of memory" in str(error)
        )

    def measured(self, result: ProfileResult) -> bool:
        return result.loader is not None  # only a DataLoader profile records a loader

    def rule(self, baseline: Knobs, cpu_count: int) -> Knobs | None:
        """PyTorch's own rule: as many workers as cores (it warns above that)."""
        return _with_workers(baseline, cpu_count, persistent=False)

    def estimate(self, result: ProfileResult, baseline: Knobs) -> Estimate | None:
        """Little's law on the baseline's items: the workers beyond which more add no speed, kept
        alive across epochs (`_limit.workers_for`), and the trainer on the threads the limit
        counts it on (`_limit.trainer_threads`)."""
        loader, limit = result.loader, result.limit
        if loader is None or loader.workers_estimate is None or limit is None:
            return None
        knobs = _with_workers(baseline, loader.workers_estimate, persistent=True)
        threads = trainer_threads(result, loader)
        if threads is not None and baseline.torch_threads is None:
            knobs = knobs.replace(torch_threads=threads)
        return Estimate(knobs=knobs, predicted_examples_per_sec=limit.examples_per_sec)


def _with_workers(baseline: Knobs, workers: int, *, persistent: bool) -> Knobs:
    """`baseline` with `workers` workers (kept across epochs if `persistent`): the knobs of a
    pipeline file, or a script's `DataLoader@...` sites where it has them."""
    sites = {name: workers for name in baseline.sites if name.endswith(".num_workers")}
    if not sites:
        changes: dict[str, Any] = {"num_workers": workers}
        return baseline.replace(**changes, **({"persistent_workers": True} if persistent else {}))
    if persistent:
        sites.update({n: 1 for n in baseline.sites if n.endswith(".persistent_workers")})
    return baseline.replace(**sites)


#: What a pipeline file defines to hand tfperf its loader (`make_dataset` as for tf.data).
_INPUT_FUNCTIONS = frozenset({"make_loader", "make_dataset"})
#: The names that make a file a pipeline file, not a script.
_PIPELINE_NAMES = _INPUT_FUNCTIONS | {"make_model", "make_train_step", "BASELINE", "SEARCH_SPACE"}
#: A pipeline file's names that a script's own helpers may carry too.
_HELPER_NAMES = _INPUT_FUNCTIONS | {"make_model"}
#: Calls that train in torch's words: autograd's backward pass (`loss.backward()`, also a
#: library's `accelerator.backward(loss)`).
_TRAINING_CALLS = frozenset({"backward"})
#: Imports that mean tf.data or Keras: a file with them and torch is PyTorch's only where it
#: builds a `DataLoader` itself.
_TENSORFLOW = frozenset({"tensorflow", "keras", "tf_keras"})


def _tree(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


def _imported_roots(tree: ast.Module) -> set[str]:
    """The top-level packages the file imports (`torch` for `from torch.utils import data`)."""
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def _defined(tree: ast.Module) -> set[str]:
    """The functions and plain names the file defines at its top level."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {target.id for target in targets if isinstance(target, ast.Name)}
    return names


def _builds_loader(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.Call) and callee(node) == "DataLoader" for node in ast.walk(tree)
    )


def _element(loader: Any) -> str:
    """One batch's structure in words, from the loader's batch size and first item."""
    batch = f"batches of {loader.batch_size}" if loader.batch_size else "batches"
    try:
        item = loader.dataset[0]
    except Exception:  # an IterableDataset, or one that cannot index: say less
        return f"{batch} of {type(loader.dataset).__name__} items"
    return f"{batch} of {_torch.describe(item)} items"


def _file(pipeline: Pipeline) -> PipelineFile:
    return PipelineFile.of(pipeline, "torch")


FRAMEWORK = Torch()
