"""Profiles a PyTorch pipeline file: its DataLoader and train step, measured by the core's loop.

The step timing loop (`tfperf.measure.profile`) measures the three phases as for tf.data: end
to end (wait vs compute per step), the loader alone, and the step alone on a cached batch.
Every pass the loop starts is a fresh iterator of the loader, which without
`persistent_workers` starts its worker processes again: those restarts are the core's restart
records, in the framework's words ("workers start"), weighed once per real epoch (`len(loader)`
batches unless `--epoch-steps` says otherwise). The host probe counts the CPU and memory of
the whole process tree, workers included.

Then the loader's items are timed apart in the trainer (wall and CPU per item, so a blocking
read is told apart from computing, named by the line that defines `__getitem__`), and the
limit, the workers that reach it and the advice follow (`_limit`).
"""

from __future__ import annotations

import inspect
import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tfperf.errors import (
    EmptyDatasetError,
    InputPipelineError,
    PipelineRuntimeError,
    TrainStepError,
)
from tfperf.frameworks.torch import _torch
from tfperf.frameworks.torch._build import build
from tfperf.frameworks.torch._limit import loader_advice, loader_limit, workers_for
from tfperf.hardware import detect_machine
from tfperf.knobs import Knobs, framework_knobs
from tfperf.measure import EpochInfo, ProgressCallback, batch_examples, profile
from tfperf.pipeline import PipelineFile
from tfperf.probes import Probe
from tfperf.results import ProfileResult, Verdict
from tfperf.results.discovery import Discovery
from tfperf.results.stages import EpochSource, LoaderReport, StageKind
from tfperf.tracebacks import exception_user_frames, format_frames

logger = logging.getLogger(__name__)

#: How the core's restart records name a DataLoader's restart.
WORKERS_START = "workers start"
#: Items timed apart in the trainer, at most, and the most seconds spent on them.
ITEMS_TIMED, ITEM_SECONDS = 64, 0.3
#: Seconds the step is timed alone on one operator thread.
ONE_THREAD_SECONDS = 0.3


def profile_loader(
    pipeline: PipelineFile,
    knobs: Knobs | None = None,
    *,
    steps: int = 100,
    min_seconds: float = 0.0,
    warmup: int | None = None,
    probes: Sequence[Probe] | None = None,
    progress: ProgressCallback | None = None,
    epoch_steps: int | None = None,
    on_discovery: Callable[[Discovery], None] | None = None,
    **_ignored: Any,
) -> ProfileResult:
    """Measures `pipeline` under `knobs` (default: the file's `BASELINE`).

    Options of tf.data's profile with no DataLoader meaning (`strategy`, `analyse_stages`,
    `owns_process`) are accepted and ignored, so the CLI and the trials call every framework
    alike. `on_discovery` is never called: a pipeline file has no call sites.

    Raises:
        PipelineFileError: the file's functions break the contract.
        PipelineRuntimeError: the loader or the train step failed while running.
    """
    del on_discovery
    knobs = knobs if knobs is not None else pipeline.baseline
    built = build(pipeline, knobs)
    loader = built.loader
    options = _torch.loader_options(loader)
    name = pipeline.path.name
    try:
        result = profile(
            _torch.Passes(loader),
            built.step,
            steps=steps,
            min_seconds=min_seconds,
            warmup=warmup,
            pipeline=_display_path(pipeline.path),
            knobs=_as_run(knobs, options),
            probes=probes,
            progress=progress,
            epoch=_epoch(loader, options, epoch_steps),
            sync=_torch.synchronise,
        )
    except InputPipelineError as error:
        raise _explained(
            error, f"the DataLoader failed while loading batch {error.step + 1}", pipeline
        ) from error.__cause__
    except TrainStepError as error:
        raise _explained(
            error, f"the train step failed on step {error.step + 1}", pipeline
        ) from error.__cause__
    except EmptyDatasetError as error:
        raise EmptyDatasetError(f"{name}: {error}") from None
    cores = detect_machine().cpu_count
    one_thread = _one_thread_rate(built.step, loader) if knobs.torch_threads is None else None
    result.loader = _loader_report(loader, options, result, cores, one_thread)
    result.limit = loader_limit(result, result.loader, cores, one_thread)
    if result.verdict is not Verdict.COMPUTE_BOUND:
        result.advice = loader_advice(result, result.loader)
    return result


def _as_run(knobs: Knobs, options: dict[str, Any]) -> dict[str, Any]:
    """The knobs of a DataLoader pipeline, the loader's arguments as it ran (read back)."""
    values = {**knobs.to_dict(), **_torch.plain(options)}
    return {name: values.get(name) for name in framework_knobs("torch")}


def _epoch(loader: Any, options: dict[str, Any], given: int | None) -> EpochInfo:
    """A real epoch's length, and what a restart repeats: its workers starting, if any."""
    steps, source = given, EpochSource.GIVEN
    if steps is None:
        steps, source = _torch.epoch_steps(loader), EpochSource.CARDINALITY
    starts = options["num_workers"] > 0 and not options["persistent_workers"]
    return EpochInfo(
        steps=steps,
        source=source,
        stage=WORKERS_START if starts else None,
        stage_kind=StageKind.WORKERS if starts else None,
    )


def _one_thread_rate(step: Callable[[Any], Any], loader: Any) -> float | None:
    """Examples/s of the step alone on one batch with one operator thread, None if it fails.

    torch's default (a thread per core) spends a small step's time handing work between
    threads, and the workers need the cores too: the step's ceiling is the better of this
    and the compute-only phase, which ran under the knobs' threads.
    """
    torch = _torch.import_torch()
    threads = torch.get_num_threads()
    try:
        batch = next(iter(_torch.Passes(loader)))
        torch.set_num_threads(1)
        for _ in range(2):
            _torch.synchronise(step(batch))
        steps, start = 0, time.perf_counter()
        while steps < 3 or (time.perf_counter() - start < ONE_THREAD_SECONDS and steps < 500):
            _torch.synchronise(step(batch))
            steps += 1
        return batch_examples(batch) * steps / (time.perf_counter() - start)
    except Exception:  # the limit stands on the compute-only phase alone
        logger.warning("could not time the step on one thread", exc_info=True)
        return None
    finally:
        torch.set_num_threads(threads)


def _loader_report(
    loader: Any,
    options: dict[str, Any],
    result: ProfileResult,
    cores: int,
    one_thread: float | None,
) -> LoaderReport:
    report = LoaderReport(
        workers=options["num_workers"],
        persistent_workers=options["persistent_workers"],
        first_batch_s=result.end_to_end.warmup.time_to_first_batch_s,
    )
    try:
        _time_items(loader, report)
    except Exception:  # the profile stands without it; the log says why
        logger.warning("could not time the DataLoader's items apart", exc_info=True)
        return report
    compute = result.compute_only
    if report.wall_s_per_item and report.cpu_s_per_item is not None and compute is not None:
        rate = max(compute.examples_per_sec, one_thread or 0.0)
        report.workers_estimate = workers_for(
            report.wall_s_per_item, report.cpu_s_per_item, rate, cores
        )
    return report


def _time_items(loader: Any, report: LoaderReport) -> None:
    """Times the loader's items one by one in this process: wall and thread CPU per item."""
    dataset = loader.dataset
    if not hasattr(type(dataset), "__getitem__") or not hasattr(dataset, "__len__"):
        return  # an IterableDataset: its items come from `__iter__`, timed with the loader
    count = min(len(dataset), ITEMS_TIMED)
    walls, cpus = [], []
    deadline = time.perf_counter() + ITEM_SECONDS
    for index in range(count):
        start, start_cpu = time.perf_counter(), time.thread_time()
        dataset[index]
        walls.append(time.perf_counter() - start)
        cpus.append(time.thread_time() - start_cpu)
        if time.perf_counter() > deadline:
            break
    if not walls:
        return
    function = type(dataset).__getitem__
    report.item_function = function.__qualname__
    report.item_where = _where(function)
    report.wall_s_per_item = sum(walls) / len(walls)
    report.cpu_s_per_item = sum(cpus) / len(cpus)


def _where(function: Any) -> str | None:
    try:
        file = inspect.getsourcefile(function)
        _, line = inspect.getsourcelines(function)
    except (OSError, TypeError):
        return None
    return f"{Path(file).name}:{line}" if file else None


def _explained(
    error: PipelineRuntimeError, what: str, pipeline: PipelineFile
) -> PipelineRuntimeError:
    cause = error.__cause__ or error
    where = format_frames(exception_user_frames(cause, pipeline.user_paths))
    message = f"{pipeline.path.name}: {what}: {type(cause).__name__}: {cause}"
    return PipelineRuntimeError(message + (f"\n{where}" if where else ""))


def _display_path(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path(os.getcwd()).resolve()))
    except ValueError:
        return str(path)
