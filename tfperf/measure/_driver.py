"""One profile, whatever the framework: the request checked, the phases run, failures explained.

`drive` runs what every framework's profile does alike: it refuses by name the options of the
request the framework does not honour (`Framework.honours`), measures the three phases
(`profile`) of what the framework built, turns a failure inside the user's code into a message
that names the file, and records the budget. A `Measurement` is the framework's side of one
profile. The default measures `Framework.build`'s input as it is; a framework overrides what
differs: its own build, figures of its own (`finish`), its words for a failure (`explain`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from tfperf import findings
from tfperf.errors import (
    EmptyDatasetError,
    InputPipelineError,
    PipelineFileError,
    PipelineRuntimeError,
    TrainStepError,
)
from tfperf.frameworks import Framework, ProfileRequest
from tfperf.kept import kept_files
from tfperf.knobs import Knobs
from tfperf.measure._profiler import Profiler, profile
from tfperf.measure._recorder import ProgressCallback, synchronise
from tfperf.measure._restarts import EpochInfo
from tfperf.measure._window import Budget
from tfperf.pipeline import PipelineFile
from tfperf.results import ProfileResult
from tfperf.tracebacks import exception_headline, exception_user_frames, format_frames


class Measurement:
    """A framework's side of one profile of `pipeline` under `knobs` (None: its baseline)."""

    #: The input in the words of a failure ("the DataLoader failed while loading batch 3").
    input_words: ClassVar[str] = "input"

    def __init__(
        self,
        framework: Framework,
        pipeline: PipelineFile,
        knobs: Knobs | None,
        request: ProfileRequest | None,
    ) -> None:
        self.framework = framework
        self.pipeline = pipeline
        self.knobs = knobs if knobs is not None else pipeline.baseline
        self.request = request if request is not None else ProfileRequest()

    def running(self) -> contextlib.AbstractContextManager[None]:
        """Wraps the whole profile (a precision policy); nothing by default."""
        return contextlib.nullcontext()

    def measure(self) -> ProfileResult:
        """The three phases; by default, of `Framework.build`'s input as it is."""
        built = self.framework.build(self.pipeline, self.knobs, strategy=self.request.strategy)
        self.request.discovered(built.discovery)
        return self.phases(_Passes(built.batches), built.step, sync=built.sync)

    def phases(
        self,
        data: Iterable[Any],
        step: Callable[[Any], Any],
        *,
        sync: Callable[[Any], None] = synchronise,
        knobs: Knobs | Mapping[str, Any] | None = None,
        epoch: EpochInfo | None = None,
        steps: int | None = None,
        progress: ProgressCallback | None = None,
    ) -> ProfileResult:
        """`profile` of `data` and `step` under the request's windows, probes and budget;
        `knobs` (the configuration as it ran), `steps` and `progress` replace the request's."""
        request = self.request
        return profile(
            data,
            step,
            steps=request.steps if steps is None else steps,
            min_seconds=request.min_seconds,
            warmup=request.warmup,
            pipeline=display_path(self.pipeline.path),
            knobs=self.knobs if knobs is None else knobs,
            probes=request.probes,
            progress=request.progress if progress is None else progress,
            epoch=epoch,
            sync=sync,
            max_seconds=Budget(request.budget_s).phase_s,
            measure_pipeline=request.measures_pipeline,
            measure_compute=request.measures_compute,
        )

    def profiler(self) -> Profiler:
        """A profiler for the request, not yet entered: for a script whose own loop is served
        the phases (`tfperf.measure.served`)."""
        request = self.request
        return Profiler(
            warmup=request.warmup,
            pipeline=display_path(self.pipeline.path),
            knobs=self.knobs,
            probes=request.probes,
            progress=request.progress,
        )

    def explain(self, error: InputPipelineError | TrainStepError) -> PipelineRuntimeError:
        """The failure of the input or of the step in the user's words: the file, the step,
        the exception and the user's own frames."""
        what = (
            f"the {self.input_words} failed while loading batch {error.step + 1}"
            if isinstance(error, InputPipelineError)
            else f"the train step failed on step {error.step + 1}"
        )
        cause = error.__cause__ or error
        where = format_frames(exception_user_frames(cause, self.pipeline.user_paths))
        message = f"{self.pipeline.path.name}: {what}: {exception_headline(cause)}"
        return PipelineRuntimeError(message + (f"\n{where}" if where else ""))

    def finish(self, result: ProfileResult) -> ProfileResult:
        """`result` with the framework's own figures and findings; none by default."""
        return findings.conclude(result)


def drive(measurement: Measurement) -> ProfileResult:
    """Runs one profile: what every framework's `profile` does, with `measurement` doing what
    differs.

    Raises:
        PipelineFileError: the request sets an option the framework does not honour.
        PipelineRuntimeError: the input or the step failed while running (`explain` says
            where); `EmptyDatasetError`: the input yields no batch.
    """
    framework, pipeline = measurement.framework, measurement.pipeline
    refused = measurement.request.refused(framework.honours)
    if refused:
        raise PipelineFileError(
            f"{pipeline.path.name}: a {framework.words.label} pipeline does not honour "
            f"{' or '.join(refused)}, so it cannot be profiled as asked; leave "
            f"{'them' if len(refused) > 1 else 'it'} out."
        )
    with kept_files(framework.writers) as kept, measurement.running():
        try:
            result = measurement.measure()
        except (InputPipelineError, TrainStepError) as error:
            raise measurement.explain(error) from error.__cause__
        except EmptyDatasetError as error:
            raise EmptyDatasetError(f"{pipeline.path.name}: {error}") from None
        result.budget_s = measurement.request.budget_s
        result = measurement.finish(result)
        result.files_put_back, result.files_created = kept.copied(), kept.created()
        return result


def display_path(path: Path) -> str:
    """`path` relative to the working directory when it lies below it, else absolute."""
    try:
        return str(path.resolve().relative_to(Path(os.getcwd()).resolve()))
    except ValueError:
        return str(path)


class _Passes:
    """An input's `batches` as an iterable the step timing loop restarts: a pass per `iter`."""

    def __init__(self, batches: Callable[[], Iterable[Any]]) -> None:
        self.batches = batches

    def __iter__(self) -> Iterator[Any]:
        return iter(self.batches())
