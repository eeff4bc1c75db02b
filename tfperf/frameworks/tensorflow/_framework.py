"""tf.data and Keras behind `tfperf.frameworks.Framework`.

Pipelines are pipeline files (`make_dataset(knobs)` with `make_model` or `make_train_step`),
plain files and training scripts; the input is a `tf.data.Dataset` whose parallel work runs on
threads of the training process; stages are recovered from the dataset's graph; zero-change
mode intercepts `keras.Model.fit` and finds and patches the tf.data calls that built the input.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from tfperf.errors import PipelineRuntimeError
from tfperf.frameworks import (
    CallSites,
    DeviceLayout,
    Framework,
    Input,
    Pipeline,
    ProfileRequest,
    Service,
    StageNode,
    StrategyKind,
    Words,
    Workers,
)
from tfperf.frameworks.tensorflow import _tf
from tfperf.frameworks.tensorflow._build import build
from tfperf.frameworks.tensorflow._chain import recover_stages
from tfperf.frameworks.tensorflow._discover import discover_sites
from tfperf.frameworks.tensorflow._guard import fit_refused
from tfperf.frameworks.tensorflow._runner import PipelineMeasurement
from tfperf.frameworks.tensorflow._training import probe_training
from tfperf.kept import Writer
from tfperf.measure import drive, synchronise
from tfperf.pipeline import PipelineFile, load_pipeline
from tfperf.sites import patch_for

if TYPE_CHECKING:
    from tfperf.knobs import Knobs
    from tfperf.offload import OffloadResult, OffloadSettings
    from tfperf.results import ProfileResult, TrainingRate
    from tfperf.results.discovery import Discovery

logger = logging.getLogger(__name__)

#: Top-level modules whose import marks a file as written for TensorFlow.
_MODULES = frozenset({"tensorflow", "keras", "tf_keras"})


class TensorFlowSites:
    """The tf.data calls in a user's plain file or script: found by recording, patched by AST."""

    patch = staticmethod(patch_for)

    def find(self, pipeline: Any, *, measure_stages: bool = False) -> Discovery:
        return discover_sites(_file(pipeline), measure_stages=measure_stages)


class TensorFlowService:
    """tf.data service: `offload` sizes workers on this host; `check` precedes `--service`."""

    def offload(
        self,
        pipeline: Any,
        knobs: Knobs,
        settings: OffloadSettings,
        *,
        on_status: Callable[[str], None],
    ) -> OffloadResult:
        from tfperf.frameworks.tensorflow._service import offload

        file = _file(pipeline)

        def model_rate() -> float:
            rates = probe_training(file, knobs, [{}])
            if not rates:
                raise PipelineRuntimeError(
                    f"{file.path.name}: the model step failed when timed alone; run "
                    f"`tfperf profile {file.path.name}` to see why, or give the model's rate "
                    "with --model-examples-per-sec."
                )
            return rates[0].examples_per_sec

        return offload(
            file, knobs, settings, model_examples_per_sec=model_rate, on_status=on_status
        )

    def check(self, pipeline: Any, knobs: Knobs, address: str, timeout_s: float) -> None:
        from tfperf.frameworks.tensorflow._build import build_dataset
        from tfperf.frameworks.tensorflow._service import check_reachable, check_runs_on_service

        file = _file(pipeline)
        dataset, _ = build_dataset(file, knobs)
        check_runs_on_service(dataset, file.path.name)
        check_reachable(address, timeout_s)


class TensorFlow(Framework):
    """tf.data input, Keras (or the file's own) train step, `tf.distribute` strategies."""

    name: ClassVar[str] = "tensorflow"
    workers: ClassVar[Workers] = Workers.THREADS
    hook: ClassVar[str] = "keras.Model.fit"
    honours: ClassVar[frozenset[str]] = frozenset(ProfileRequest.__dataclass_fields__)  # all
    preload: ClassVar[tuple[str, ...]] = ("tensorflow", "keras")
    # `.keras` archives are written through Python's files; weights alone through HDF5's C.
    writers: ClassVar[tuple[Writer, ...]] = (Writer("keras.Model.save_weights", "filepath"),)
    words: ClassVar[Words] = Words(
        name="TensorFlow",
        pipeline="tf.data",
        sites_found_while="dataset was built",
        oom_error="ResourceExhaustedError",
        oom_marks=("OOM", "ResourceExhausted"),
        label="tf.data",
        script_stop="model.fit or its own loop's first step",
        first_work="map or read",
    )

    def out_of_memory(self, error: BaseException) -> bool:
        tf = sys.modules.get("tensorflow")  # not loaded: none of its errors can be this one
        return tf is not None and isinstance(error, tf.errors.ResourceExhaustedError)

    def claims(self, source: str) -> bool:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            return False
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            else:
                continue
            if any(name.split(".")[0] in _MODULES for name in names):
                return True
        return False

    def start(self, layout: DeviceLayout | None = None, *, owns_process: bool = False) -> None:
        _tf.import_tensorflow_quietly()
        if layout is not None:
            _tf.configure_devices(layout)  # before anything touches a device
        if owns_process:
            _tf.enable_gpu_memory_growth()

    def import_guard(
        self, tree: ast.Module, file: Path, shown: str
    ) -> contextlib.AbstractContextManager[None]:
        return fit_refused(tree, file, shown)  # `keras.Model.fit` raises while it imports

    def load(
        self, path: str | Path, argv: Sequence[str] = (), *, needs_step: bool = True
    ) -> PipelineFile:
        return load_pipeline(path, argv, needs_step=needs_step)

    def build(
        self, pipeline: Pipeline, knobs: Knobs, *, strategy: StrategyKind | None = None
    ) -> Input:
        with _tf.precision_policy(knobs.mixed_precision):
            built = build(_file(pipeline), knobs, strategy)
        data, dataset = built.data, built.dataset
        return Input(
            batches=lambda: iter(data),  # a tf.data iterator per pass
            step=built.step,
            sync=synchronise,
            element=_tf.describe_structure(dataset.element_spec),
            epoch_steps=_tf.cardinality(dataset),
            options=self.read_options(dataset),
            native=dataset,
            discovery=built.discovery,
        )

    def stages(self, built: Input) -> list[StageNode] | None:
        return recover_stages(built.native)

    def apply_options(self, native: Any, knobs: Knobs) -> Any:
        return _tf.apply_options(native, knobs)

    def read_options(self, native: Any) -> dict[str, Any]:
        options = _tf.dataset_options(native)
        return dataclasses.asdict(options) if options is not None else {}

    def profile(
        self, pipeline: Pipeline, knobs: Knobs | None = None, request: ProfileRequest | None = None
    ) -> ProfileResult:
        return drive(PipelineMeasurement(self, _file(pipeline), knobs, request))

    def probe_training(
        self, pipeline: Pipeline, knobs: Knobs, settings: Sequence[Mapping[str, Any]]
    ) -> list[TrainingRate]:
        return probe_training(_file(pipeline), knobs, settings)

    def sites(self) -> CallSites | None:
        return TensorFlowSites()

    def service(self) -> Service | None:
        return TensorFlowService()


def _file(pipeline: Pipeline) -> PipelineFile:
    return PipelineFile.of(pipeline, "tensorflow")


FRAMEWORK = TensorFlow()
