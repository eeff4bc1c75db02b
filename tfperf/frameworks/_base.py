"""The interface every input framework implements, and the invariants each must keep.

What differs between input frameworks (tf.data, a PyTorch `DataLoader`, tf.data service) sits
behind `Framework`; the measurement core (the step timing loop, probes, analysis, the limit,
the tuner, the study, results and reports) holds a `Framework` and the neutral records here,
and imports no framework. A new framework is a new implementation (a subpackage registered in
`tfperf.frameworks._registry`) that passes `tests/frameworks/test_contract.py`, never a
conditional in the core.

Invariants every implementation keeps (the contract test checks each):

1. Importing the implementation's module imports no framework: the framework itself is
   imported inside its methods, so `frameworks.get(name)` and `claims` are cheap.
2. `claims(source)` reads source text only; it never imports or runs the file.
3. `build(pipeline, knobs)` returns an `Input` whose `batches()` starts a fresh pass each call,
   whose `step(batch)` consumes one batch, and whose `sync(outputs)` returns only once the
   step's asynchronous work is finished, so the step clock stops when the work has.
4. `stages(input)` lists the input's stages from source to output, or returns None where the
   framework has no stage graph (a `DataLoader`); it never raises for an input `build` made.
5. `read_options(input.native)` reads back what `apply_options` set: applying the same knobs
   twice reads back the same options.
6. `sites()` is None where the framework cannot find and patch call sites in user code.
7. Inside `import_guard(...)`, importing a file that trains on import raises
   `PipelineFileError`; a file that does not train imports as it would without it.
8. `profile` runs `tfperf.measure.drive`: the three phases measured as the `ProfileRequest` asks,
   and a field outside `honours` set to other than its default refused by name, before any run.
"""

from __future__ import annotations

import abc
import ast
import contextlib
import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from tfperf.frameworks._request import DRIVEN, ProfileRequest
from tfperf.frameworks._words import Words
from tfperf.kept import Writer
from tfperf.results.stages import Stage

if TYPE_CHECKING:
    from tfperf.frameworks._devices import DeviceLayout, StrategyKind
    from tfperf.knobs import Knobs
    from tfperf.offload import OffloadResult, OffloadSettings
    from tfperf.results import ProfileResult, TrainingRate
    from tfperf.results.discovery import Discovery
    from tfperf.results.tune import Estimate


class Workers(str, Enum):
    """Where an input's parallel work runs, which decides how its CPU cost is counted."""

    THREADS = "threads"  # on threads of the training process (tf.data)
    PROCESSES = "processes"  # in worker processes (a DataLoader's `num_workers`)


class Pipeline(Protocol):
    """A loaded pipeline file or training script, as a framework's `load` returns it."""

    @property
    def path(self) -> Path: ...

    @property
    def baseline(self) -> Knobs: ...


@dataclasses.dataclass
class StageNode(Stage):
    """One stage found in an input: what it is, and the input that ends with it.

    `dataset` is the input cut right after this stage (the framework's own object);
    `calls_python`, whether its function runs Python per element; `draws_random`, the random
    ops its own function draws anew at each call (none for most stages).
    """

    class_name: str
    dataset: Any
    calls_python: bool = False
    draws_random: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Input:
    """An input built for one set of knobs, and the step that consumes it.

    Attributes:
        batches: starts a fresh pass over the input; the step timing loop iterates it.
        step: runs one training step on a batch and returns its outputs.
        sync: blocks until `outputs` of a step exist (forces asynchronous work).
        element: the structure of one batch, in words ("(float32[32, 8], int32[32])").
        epoch_steps: batches in one pass, where the framework knows it; else None.
        options: the input's options as read back from it, by knob name.
        native: the framework's own input object (a `tf.data.Dataset`, a `DataLoader`).
        discovery: the call sites found while building a plain file or script; else None.
    """

    batches: Callable[[], Iterable[Any]]
    step: Callable[[Any], Any]
    sync: Callable[[Any], None]
    element: str
    epoch_steps: int | None
    options: Mapping[str, Any]
    native: Any
    discovery: Discovery | None = None


@runtime_checkable
class CallSites(Protocol):
    """Finding and patching the input calls in a user's own files (zero-change mode)."""

    def find(self, pipeline: Any, *, measure_stages: bool = False) -> Discovery:
        """The tunable calls the build of `pipeline` makes, where each is written."""
        ...

    def patch(
        self,
        root: Path,
        discovery: Discovery,
        before: Mapping[str, Any],
        after: Mapping[str, Any],
        *,
        script: bool,
    ) -> Any:
        """The patch of the files under `root` that runs `after`, as measured, instead of
        `before`."""
        ...


@runtime_checkable
class Service(Protocol):
    """Input moved to remote workers (tf.data service): sized on this host, or checked
    before a measurement through a cluster the user runs."""

    def offload(
        self,
        pipeline: Any,
        knobs: Knobs,
        settings: OffloadSettings,
        *,
        on_status: Callable[[str], None],
    ) -> OffloadResult:
        """How many workers of how many cores feed `pipeline`'s model, measured here."""
        ...

    def check(self, pipeline: Any, knobs: Knobs, address: str, timeout_s: float) -> None:
        """Raises before a measurement if the dispatcher at `address` (`HOST:PORT`) does not
        answer or a stage of the input cannot run on a worker."""
        ...


class Framework(abc.ABC):
    """One input framework: how tfperf loads, builds, measures and patches its pipelines."""

    #: The registry's name for it ("tensorflow").
    name: ClassVar[str]
    #: Where its input's parallel work runs.
    workers: ClassVar[Workers]
    #: What zero-change mode intercepts in a script ("keras.Model.fit", "DataLoader.__iter__").
    hook: ClassVar[str]
    #: The function a pipeline file defines to build its input, called with the knobs.
    input_function: ClassVar[str] = "make_dataset"
    #: The functions a pipeline file may define to train, with what each returns, in the
    #: order tfperf prefers them.
    training_functions: ClassVar[tuple[tuple[str, str], ...]] = (
        ("make_model", "a compiled Keras model, which tfperf trains on each batch"),
        (
            "make_train_step",
            "a callable that tfperf runs on each batch (e.g. a `tf.function` doing one "
            "optimizer step)",
        ),
    )
    #: The fields of a `ProfileRequest` its profile honours; the driver refuses the others by
    #: name when they are set (`tfperf.measure.drive`). The default: those the driver applies.
    honours: ClassVar[frozenset[str]] = DRIVEN
    #: Whether its input has stages `stages()` recovers, which tfperf measures each alone.
    stage_graph: ClassVar[bool] = True
    #: The modules every trial imports before its pipeline file, the same in each: a tuner
    #: imports them once in the process its trials fork from (`tfperf.trials._zygote`).
    preload: ClassVar[tuple[str, ...]] = ()
    #: Its functions that write a file of the user's in native code, which Python's own file
    #: events do not see: copied aside before each call and put back after a run
    #: (`tfperf.kept`), as every file the user's code writes through Python is.
    writers: ClassVar[tuple[Writer, ...]] = ()
    #: Its words, which every sentence tfperf says about its pipelines takes (never a test of
    #: the framework's name in the core): its name, its pipeline's, its out-of-memory error.
    words: ClassVar[Words]

    @abc.abstractmethod
    def claims(self, source: str) -> bool:
        """Whether a file with this source text is written for this framework."""

    @abc.abstractmethod
    def start(self, layout: DeviceLayout | None = None, *, owns_process: bool = False) -> None:
        """Readies this process: imports the framework quietly and lays out its devices.

        Call it before anything builds an input; `owns_process` lets it set process-wide
        state (GPU memory growth) in a process tfperf runs.
        """

    def is_script(self, tree: ast.Module) -> bool | None:
        """Whether a file (parsed: `tree`) is a training script of this framework, run as
        `python FILE` rather than imported as a pipeline file; None: the loader's own rule
        decides (`tfperf.pipeline`: a `fit` call, or a `__main__` block without the
        contract's names). The default is None."""
        return None

    def import_guard(
        self, tree: ast.Module, file: Path, shown: str
    ) -> contextlib.AbstractContextManager[None]:
        """A block in which importing the pipeline file `file` (parsed: `tree`) cannot train.

        The loader imports a pipeline file to read its functions; a call of the framework's
        training entry point reached on import (a `main()` at the top of the file) must stop
        the import with a `PipelineFileError` naming the line, not train. The default guards
        nothing.
        """
        return contextlib.nullcontext()

    @abc.abstractmethod
    def load(
        self, path: str | Path, argv: Sequence[str] = (), *, needs_step: bool = True
    ) -> Pipeline:
        """Loads a pipeline file or training script, checked against the contract.

        `needs_step` False: the training step will be emulated (`profile(..., step_time_s=)`),
        so a file that builds only its input, with no model or step, is accepted.
        """

    @abc.abstractmethod
    def build(
        self, pipeline: Pipeline, knobs: Knobs, *, strategy: StrategyKind | None = None
    ) -> Input:
        """Builds the input (options applied) and the step of `pipeline` under `knobs`."""

    @abc.abstractmethod
    def stages(self, built: Input) -> list[StageNode] | None:
        """The stages of `built`'s input from source to output; None: no stage graph."""

    @abc.abstractmethod
    def apply_options(self, native: Any, knobs: Knobs) -> Any:
        """`native` with the knobs that are the framework's input options applied."""

    @abc.abstractmethod
    def read_options(self, native: Any) -> dict[str, Any]:
        """The input options `native` carries, by knob name."""

    @property
    def emulates_step(self) -> bool:
        """Whether `--step-time` can stand in for its training step (an emulated accelerator)."""
        return "step_time_s" in self.honours

    @abc.abstractmethod
    def profile(
        self, pipeline: Pipeline, knobs: Knobs | None = None, request: ProfileRequest | None = None
    ) -> ProfileResult:
        """Measures `pipeline` under `knobs` (None: its baseline) end to end, the input alone
        and the step alone, as `request` asks (None: its defaults; `tfperf.measure.drive`)."""

    @abc.abstractmethod
    def probe_training(
        self, pipeline: Pipeline, knobs: Knobs, settings: Sequence[Mapping[str, Any]]
    ) -> list[TrainingRate]:
        """The step's rate alone under each of the training `settings`."""

    @abc.abstractmethod
    def sites(self) -> CallSites | None:
        """Call-site finding and patching; None where the framework has none."""

    def service(self) -> Service | None:
        """Remote input workers (`tfperf offload`, `--service`); None where the framework has
        none (the default)."""
        return None

    def rule(self, baseline: Knobs, cpu_count: int) -> Knobs | None:
        """The framework's own rule of thumb applied to `baseline`, which a study measures as
        a reference (PyTorch's: `num_workers` = cores); None where it has none beyond the
        baseline (tf.data's rule, AUTOTUNE, is a reference of its own)."""
        return None

    def estimate(self, result: ProfileResult, baseline: Knobs) -> Estimate | None:
        """The configuration this framework's figures size from the baseline's profile, where
        the pipeline model (which needs a stage graph) makes none; None by default."""
        return None

    def out_of_memory(self, error: BaseException) -> bool:
        """Whether `error` itself (not its causes) is this framework running out of device
        memory; False where the framework was never imported. The default is False."""
        return False

    def measured(self, result: ProfileResult) -> bool:
        """Whether a stored profile says itself that this framework measured it (a stored
        study keeps no framework name); False by default."""
        return False

    def announce(self, pipeline: Pipeline) -> str | None:
        """The one line the CLI says on loading `pipeline`, naming the framework it was
        taken for ("PyTorch DataLoader pipeline: pipeline.py"); None: say nothing (the
        default framework)."""
        return None
