"""Profiles a PyTorch pipeline file: its DataLoader and train step, measured by the core's loop.

The step timing loop (`tfperf.measure.profile`) measures the three phases as for tf.data: end
to end (wait vs compute per step), the loader alone, and the step alone on a cached batch.
Every pass the loop starts is a fresh iterator of the loader, which without
`persistent_workers` starts its worker processes again: those restarts are the core's restart
records, in the framework's words ("workers start"), weighed once per real epoch (`len(loader)`
batches unless `--epoch-steps` says otherwise). End to end is then the rate of a real epoch,
its workers' start-up charged as `_epoch.with_start_up` says, for a script and a pipeline file
alike: the tuner ranks trials by it. The host probe counts the CPU and memory of the whole
process tree, workers included.

Then the loader's items are timed apart in the trainer (`_items`: wall and CPU per item, so a
blocking read is told apart from computing, named by the line that defines `__getitem__`), the host
RAM of trainer and workers is read with shared pages once (`tfperf.probes.MemorySampler`), and the
limit, the workers that reach it and the advice follow (`_limit`). A training script is measured by
`_script` and gets the same report.

Where the step used CUDA, the GPUs also get PyTorch's allocator peak (reset as the profile
starts), and a pipeline file's batch is copied to the GPU apart, pageable and pinned (`_copy`).
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

from tfperf import findings
from tfperf.errors import (
    EmptyDatasetError,
    InputPipelineError,
    PipelineRuntimeError,
    TrainStepError,
)
from tfperf.frameworks.torch import _torch
from tfperf.frameworks.torch._build import build
from tfperf.frameworks.torch._copy import host_copies
from tfperf.frameworks.torch._epoch import starts_each_epoch, with_start_up
from tfperf.frameworks.torch._findings import loader_findings, with_check_notes, worker_shards
from tfperf.frameworks.torch._items import time_items
from tfperf.frameworks.torch._limit import (
    contention_finding,
    estimate_workers,
    loader_limit,
    rate_finding,
    threads_finding,
)
from tfperf.frameworks.torch._pass import PASS_SECONDS, CheckedPass, check_pass
from tfperf.frameworks.torch._script import profile_script_pipeline
from tfperf.hardware import detect_machine
from tfperf.knobs import Knobs, framework_knobs
from tfperf.measure import Budget, EpochInfo, Measurement, batch_examples
from tfperf.measure.training import time_step
from tfperf.pipeline import run_as_main
from tfperf.probes import MemoryPeak, MemorySampler
from tfperf.results import PhaseResult, ProfileResult
from tfperf.results.stages import EpochSource, LoaderReport, StageKind

logger = logging.getLogger(__name__)

#: How the core's restart records name a DataLoader's restart.
WORKERS_START = "workers start"
#: Items timed apart in the trainer, at most, and the most seconds spent on them.
ITEMS_TIMED, ITEM_SECONDS = 64, 0.3
#: Seconds the step is timed alone on one operator thread.
ONE_THREAD_SECONDS = 0.3


class LoaderMeasurement(Measurement):
    """A pipeline file's `DataLoader` and step, measured by the core's loop.

    Then one more pass of the loader (its workers started once) is checked, and serves the
    step timed on one thread and the batch copied to the GPU.
    """

    input_words: ClassVar[str] = "DataLoader"

    def measure(self) -> ProfileResult:
        _torch.reset_allocator_peaks()
        built = build(self.pipeline, self.knobs)
        self.loader, self.step = built.loader, built.step
        self.options = _torch.loader_options(self.loader)
        self.epoch = _epoch(self.loader, self.options, self.request.epoch_steps)
        with MemorySampler() as memory:
            result = self.phases(
                _torch.Passes(self.loader),
                built.step,
                sync=_torch.synchronise,
                knobs=_as_run(self.knobs, self.options),
                epoch=self.epoch,
            )
        self.memory = memory.peak
        return result

    def finish(self, result: ProfileResult) -> ProfileResult:
        loader = self.loader
        result.end_to_end = _per_epoch(result, self.epoch.steps, self.options)
        on_one_thread, copied = self.knobs.torch_threads is None, _torch.uses_cuda()
        needs_batch = on_one_thread or copied
        checked = _checked_pass(loader, needs_batch=needs_batch, budget_s=result.budget_s)
        batch = checked.first_batch if checked is not None else None
        one_thread = (
            _one_thread_rate(self.step, batch) if on_one_thread and batch is not None else None
        )
        result = _finished(result, loader, self.memory, one_thread, checked)
        if result.loader is not None and copied and batch is not None:
            _attach_copy(result.loader, batch)
        return result


class ScriptMeasurement(Measurement):
    """A training script run as it is (`_script.profile_script_pipeline`), its `DataLoader`
    sites overridden by `knobs.sites`; its phases share what its start-up left of the budget
    (`script_phase_s`)."""

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """The script stays `__main__` until tfperf is done with its loader, the checked
        pass after the phases included: workers started by spawn import it (`run_as_main`)."""
        with run_as_main(self.pipeline.path, self.pipeline.argv):
            yield

    def measure(self) -> ProfileResult:
        _torch.reset_allocator_peaks()
        request = self.request
        result, self.found = profile_script_pipeline(
            self.pipeline,
            self.knobs,
            steps=request.steps,
            min_seconds=request.min_seconds,
            warmup=request.warmup,
            probes=request.probes,
            progress=request.progress,
            on_discovery=request.on_discovery,
            epoch_for=lambda loader, anew: _epoch(
                loader, _as_run_each_pass(loader, anew), request.epoch_steps
            ),
            budget_s=request.budget_s,
            measure_pipeline=request.measures_pipeline,
            measure_compute=request.measures_compute,
        )
        return result

    def explain(self, error: InputPipelineError | TrainStepError) -> PipelineRuntimeError:
        return error  # as `_script` raises it: a script's profile words its own failures

    def finish(self, result: ProfileResult) -> ProfileResult:
        found, knobs, epoch_steps = self.found, self.knobs, self.request.epoch_steps
        sites = {
            site.name: knobs.sites.get(site.name, site.value) for site in found.discovery.sites
        }
        result.knobs = {**sites, "torch_threads": knobs.torch_threads}  # what the script ran
        given = epoch_steps or found.epoch_steps or _torch.epoch_steps(found.loader)
        options = _as_run_each_pass(found.loader, found.built_anew)
        result.end_to_end = _per_epoch(result, given, options)
        checked = _checked_pass(found.loader, needs_batch=False, budget_s=result.budget_s)
        result.cycled = found.cycled
        return _finished(result, found.loader, found.memory, None, checked, found.built_anew)


def _as_run_each_pass(loader: Any, anew: str | None) -> dict[str, Any]:
    """The loader's options as each pass runs them: a loader the script builds anew for
    every pass keeps no workers, whatever `persistent_workers` says."""
    options = _torch.loader_options(loader)
    return {**options, "persistent_workers": False} if anew else options


def _per_epoch(
    result: ProfileResult, epoch_steps: int | None, options: dict[str, Any]
) -> PhaseResult:
    """End to end at the rate of a real epoch, start-up included (`_epoch.with_start_up`).

    Scripts and pipeline files alike: the tuner ranks trials by this rate, so a loader that
    starts its workers at every epoch pays for it against one that keeps them.
    """
    restarts = starts_each_epoch(options["num_workers"], options["persistent_workers"])
    return with_start_up(
        result.end_to_end, epoch_steps, restarts_workers=restarts, restart=result.restarts
    )


def _finished(
    result: ProfileResult,
    loader: Any,
    memory: MemoryPeak | None,
    one_thread: float | None,
    checked: CheckedPass | None = None,
    anew: str | None = None,
) -> ProfileResult:
    """`result` with the loader's report, its limit and advice in the framework's words;
    `anew`: the script's loop that builds the loader for each pass (`ScriptProfile`)."""
    cores = detect_machine().cpu_count
    report = _loader_report(loader, _torch.loader_options(loader), result, cores, one_thread)
    report.built_anew = anew
    if memory is not None and memory.peak is not None:
        report.host_ram_peak_bytes = memory.peak_bytes
        report.workers_ram_peak_bytes = memory.peak.workers_bytes
    if checked is not None:
        report.pass_check, report.worker_memory = checked.pass_check, checked.memory
    result.loader = report
    for gpu, peak in zip(result.gpus, _torch.allocator_peaks(), strict=False):
        gpu.torch_allocator_peak_bytes = peak  # torch and NVML list the visible GPUs alike
    result.limit = loader_limit(result, report, cores)
    return _with_loader_findings(result, report)


def _with_loader_findings(result: ProfileResult, report: LoaderReport) -> ProfileResult:
    """`result` concluded with the DataLoader's own findings: its rates in its words
    (`_limit.rate_finding`), what the checked pass found (`_findings`; duplicated data makes
    every rate wrong, so it weighs most and leads), and a fix that turns persistent_workers
    on saying what to check (`_findings.with_check_notes`)."""
    rate, threads = rate_finding(result, report), threads_finding(result, report)
    shards, contention = worker_shards(result, report), contention_finding(result, report)
    made = (rate, threads, shards, contention)
    own = [*loader_findings(report), *(f for f in made if f is not None)]
    return findings.conclude(result, framework=[*own, *with_check_notes(result.findings)])


def _as_run(knobs: Knobs, options: dict[str, Any]) -> dict[str, Any]:
    """The knobs of a DataLoader pipeline, the loader's arguments as it ran (read back)."""
    values = {**knobs.to_dict(), **_torch.plain(options)}
    return {name: values.get(name) for name in framework_knobs("torch")}


def _epoch(loader: Any, options: dict[str, Any], given: int | None) -> EpochInfo:
    """A real epoch's length, and what a restart repeats: its workers starting, if any."""
    steps, source = given, EpochSource.GIVEN
    if steps is None:
        steps, source = _torch.epoch_steps(loader), EpochSource.CARDINALITY
    if steps == 0:  # said now, in the loader's words: nothing downstream has a batch to time
        raise EmptyDatasetError(_no_batch(loader))
    starts = starts_each_epoch(options["num_workers"], options["persistent_workers"])
    return EpochInfo(
        steps=steps,
        source=source,
        stage=WORKERS_START if starts else None,
        stage_kind=StageKind.WORKERS if starts else None,
    )


def _no_batch(loader: Any) -> str:
    """Why a loader of length 0 yields no batch, naming its dataset and where it is defined."""
    dataset = loader.dataset
    kind = type(dataset)
    try:
        line = inspect.getsourcelines(kind)[1]
        where = f" ({Path(inspect.getsourcefile(kind) or '?').name}:{line})"
    except (OSError, TypeError):
        where = ""
    size = _torch.epoch_steps(dataset) if hasattr(dataset, "__len__") else None
    why = (
        f"has {size} items, fewer than one batch of {loader.batch_size}, and drop_last=True "
        "drops it"
        if size
        else "has length 0 (`len(dataset)` is 0)"
    )
    return (
        f"the DataLoader yields no batch: its dataset {kind.__name__}{where} {why}, so there is "
        "nothing to measure. Check that the files or the index it reads exist and are not "
        "filtered out."
    )


def _checked_pass(
    loader: Any, *, needs_batch: bool, budget_s: float | None = None
) -> CheckedPass | None:
    """A loader with workers: one pass checked (`_pass.check_pass`: its data against the
    trainer's read, its workers' memory), for at most a phase's share of `budget_s`. Without
    workers, or where the check fails (logged), only a batch if `needs_batch`; None if the
    loader fails now: the profile stands without it."""
    if loader.num_workers > 0:
        try:
            return check_pass(
                loader, max_seconds=min(PASS_SECONDS, Budget(budget_s).phase_s or PASS_SECONDS)
            )
        except Exception:  # the profile stands without the check; the log says why
            logger.warning("could not check a pass of the loader", exc_info=True)
    if not needs_batch:
        return None
    try:
        return CheckedPass(next(iter(_torch.Passes(loader))), None, None)
    except Exception:  # what needs the batch stands on the profile alone
        logger.warning("could not take a batch after the profile", exc_info=True)
        return None


def _one_thread_rate(step: Callable[[Any], Any], batch: Any) -> float | None:
    """Examples/s of the step alone on `batch` with one operator thread, None if it fails.

    torch's default (a thread per core) spends a small step's time handing work between
    threads, and the workers need the cores too: the step's ceiling is the better of this
    and the compute-only phase, which ran under the knobs' threads.
    """
    torch = _torch.import_torch()
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        window = time_step(step, batch, _torch.synchronise, ONE_THREAD_SECONDS, max_steps=500)
        return batch_examples(batch) * window.steps / window.wall_s
    except Exception:  # the limit stands on the compute-only phase alone
        logger.warning("could not time the step on one thread", exc_info=True)
        return None
    finally:
        torch.set_num_threads(threads)


def _attach_copy(report: LoaderReport, batch: Any) -> None:
    """Times `batch` copied to the GPU onto `report`; logs if it fails."""
    try:
        timing = host_copies(batch)
    except Exception:  # the profile stands without it; the log says why
        logger.warning("could not time the host-to-GPU copy of a batch", exc_info=True)
        return
    if timing is not None:
        report.copy_bytes_per_batch = timing.bytes_per_batch
        report.copy_s_per_batch = timing.pageable_s
        report.pinned_copy_s_per_batch = timing.pinned_s


def _loader_report(
    loader: Any,
    options: dict[str, Any],
    result: ProfileResult,
    cores: int,
    one_thread: float | None,
) -> LoaderReport:
    items = _items_per_batch(result, loader)
    report = LoaderReport(
        workers=options["num_workers"],
        persistent_workers=options["persistent_workers"],
        first_batch_s=result.end_to_end.warmup.time_to_first_batch_s,
        one_thread_examples_per_sec=one_thread,
        examples_per_item=_examples_per_item(result, items),
    )
    try:
        timing = time_items(
            loader.dataset,
            loader.collate_fn,
            count=ITEMS_TIMED,
            batch_size=items or 1,
            max_seconds=ITEM_SECONDS,
        )
    except Exception:  # the profile stands without it; the log says why
        logger.warning("could not time the DataLoader's items apart", exc_info=True)
        return report
    if timing.items == 0:
        return report
    report.item_function = timing.item_function
    report.item_where = timing.item_where
    report.wall_s_per_item = timing.wall_s_per_item
    report.cpu_s_per_item = timing.cpu_s_per_item
    report.collate_wall_s_per_batch = timing.collate_wall_s_per_batch
    report.collate_cpu_s_per_batch = timing.collate_cpu_s_per_batch
    report.collate_function = timing.collate_function
    report.collate_where = timing.collate_where
    report.items_per_batch = timing.batch_size
    compute = result.compute_only
    if compute is not None:
        rate = max(compute.examples_per_sec, one_thread or 0.0)
        report.workers_estimate = estimate_workers(timing, rate / report.examples_per_item, cores)
    return report


def _items_per_batch(result: ProfileResult, loader: Any) -> int | None:
    """Items one batch gathers: the loader's `batch_size`; under a `batch_sampler` of the
    user's (`batch_size` None, batches still collated), a full batch's examples, one item
    each; None where each item is a batch itself (`batch_size=None`, no sampler)."""
    if loader.batch_size is not None:
        return int(loader.batch_size)
    if loader.batch_sampler is None:
        return None
    full = max((record.examples for record in result.end_to_end.records), default=0)
    return full or None


def _examples_per_item(result: ProfileResult, batch_size: int | None) -> float:
    """A full batch's examples over the items it batches (`batch_size`; None: each item is a
    batch itself), from the end-to-end window; 1 where it holds no batch."""
    full = max((record.examples for record in result.end_to_end.records), default=0)
    return full / (batch_size or 1) if full > 0 else 1.0
