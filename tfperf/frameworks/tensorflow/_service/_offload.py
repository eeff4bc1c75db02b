"""`tfperf offload`'s measurement: how many tf.data service workers feed the model.

In order: the cut pipeline pinned to 1, 2, ... cores (each in its own child), one batch's bytes,
the model's rate, then a local dispatcher and workers on disjoint cores: the trainer's ceiling
on a cached batch (compression on and off) and the real pipeline through k = 1..K workers.
`tfperf.offload`'s rules turn the figures into the answer.

A service fault during the service measurements (a worker that dies, a dispatcher that goes
away, no batch for `timeout_s`) does not lose what was measured before it: the result comes
back with `fault` set and the figures it has.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from tfperf.errors import ServiceError
from tfperf.frameworks.tensorflow import _tf
from tfperf.frameworks.tensorflow._build import raw_dataset
from tfperf.frameworks.tensorflow._service._cut import check_runs_on_service, cut_dataset
from tfperf.frameworks.tensorflow._service._measure import (
    batch_bytes,
    pinned_rate,
    service_ceiling,
    spawn_rate,
    through_service,
)
from tfperf.frameworks.tensorflow._service._servers import (
    Child,
    LocalCluster,
    check_port_free,
    host_cores,
    spawn_workers,
    stop_children,
)
from tfperf.knobs import Knobs
from tfperf.measure import batch_examples
from tfperf.offload import (
    CoreRate,
    OffloadResult,
    OffloadSettings,
    ServiceCeiling,
    VerifyPoint,
    binding,
    cores_per_worker,
    fit_workers,
    network_ceiling,
    workers_needed,
)
from tfperf.pipeline import PipelineFile

logger = logging.getLogger(__name__)

Status = Callable[[str], None]


@dataclasses.dataclass(frozen=True)
class _Sample:
    """The cut pipeline and one batch of it: what every later measurement starts from."""

    dataset: Any
    label: str
    batch: Any
    examples: int
    raw_bytes: int
    compressed_bytes: int


@dataclasses.dataclass
class _Figures:
    """What has been measured so far; a fault keeps it."""

    model: float = 0.0
    rates: list[CoreRate] = dataclasses.field(default_factory=list)
    ceilings: list[ServiceCeiling] = dataclasses.field(default_factory=list)
    verify: list[VerifyPoint] = dataclasses.field(default_factory=list)
    fault: str | None = None


def offload(
    pipeline: PipelineFile,
    knobs: Knobs,
    settings: OffloadSettings,
    *,
    model_examples_per_sec: Callable[[], float],
    on_status: Status = logger.info,
) -> OffloadResult:
    """Measures and sizes the tf.data service workers that feed `pipeline`'s model.

    Args:
        model_examples_per_sec: times the model (called only when `settings` gives no rate).
        on_status: told what is measured next, in words.

    Raises:
        PipelineFileError: a stage cannot run on a service worker (before anything runs).
        ServiceError: the service failed before a pinned rate was measured.
    """
    check_port_free(settings.port)  # before any child starts
    sample = _sample(pipeline, knobs)
    cores = host_cores()
    sweep = [cores[:count] for count in range(1, min(len(cores), settings.max_cores or 10**6) + 1)]
    spares = min(len(cores), settings.max_workers or len(cores))
    # Every child starts now, so their TensorFlow imports overlap; each then waits, idle, for
    # its command, so the measurements run on a quiet host.
    # The first worker measures the one-core rate itself: one TensorFlow fewer to start.
    on_status(f"Starting {len(sweep) - 1 + spares} processes (pinned measurements, workers)...")
    rate_children = [spawn_rate(pinned) for pinned in sweep[1:]]
    workers = spawn_workers(spares)
    figures = _Figures()
    try:
        for child in [*rate_children, *workers]:
            child.answer(settings.timeout_s)
        figures.model = settings.model_examples_per_sec or _timed(model_examples_per_sec, on_status)
        on_status(f"Measuring the pipeline up to {sample.label} pinned to 1 core...")
        figures.rates.append(pinned_rate(workers[0], pipeline, knobs, settings, cores[:1]))
        for child in rate_children:
            count = len(child.request["cores"])
            on_status(f"Measuring the pipeline up to {sample.label} pinned to {count} cores...")
            figures.rates.append(pinned_rate(child, pipeline, knobs, settings))
        chosen = cores_per_worker(figures.rates)
        most = max(1, min(spares, len(cores) // chosen.cores))
        if chosen.cores != 1:
            # Its thread pools were sized for the one core it measured on: a fresh worker
            # takes its place (`add_workers` starts one for each core set it lacks).
            stop_children(workers[:1])
            workers = workers[1:]
        stop_children(workers[most:])  # idle, but each holds a TensorFlow's memory
        _on_service(sample, cores, chosen.cores, most, workers[:most], settings, figures, on_status)
    except ServiceError as error:
        if not figures.rates:
            raise
        figures.fault = str(error)
    finally:
        stop_children([*rate_children, *workers])
    return _result(pipeline, sample, len(cores), figures, settings)


def _sample(pipeline: PipelineFile, knobs: Knobs) -> _Sample:
    """The cut pipeline, checked to run on a worker, and its first batch's size."""
    dataset = _tf.apply_options(raw_dataset(pipeline, knobs)[0], knobs)
    check_runs_on_service(dataset, pipeline.path.name)
    cut = cut_dataset(dataset)
    batch = next(iter(cut.dataset))
    raw, compressed = batch_bytes(batch)
    return _Sample(cut.dataset, cut.label, batch, batch_examples(batch), raw, compressed)


def _timed(model_examples_per_sec: Callable[[], float], on_status: Status) -> float:
    on_status("Timing the model step alone...")
    return model_examples_per_sec()


def _on_service(
    sample: _Sample,
    cores: list[int],
    per_worker: int,
    most: int,
    workers: list[Child],
    settings: OffloadSettings,
    figures: _Figures,
    on_status: Status,
) -> None:
    """The ceilings and the verify with 1..`most` workers on a local cluster, added to
    `figures` as measured; `workers` are started ones to use first."""
    with LocalCluster.start(port=settings.port) as cluster:
        on_status("Starting a local tf.data service dispatcher and worker...")
        cluster.add_workers([cores[:per_worker]], settings.timeout_s, spares=workers[:1])
        for compression in ("AUTO", "NONE"):
            on_status(f"Measuring the trainer's ceiling through the service ({compression})...")
            figures.ceilings.append(service_ceiling(cluster, sample.batch, compression, settings))
        for count in range(1, most + 1):
            if count > 1:
                start = (count - 1) * per_worker
                spares = workers[count - 1 :]
                cluster.add_workers([cores[start : start + per_worker]], settings.timeout_s, spares)
            on_status(f"Verifying: the pipeline through {count} worker(s)...")
            what = f"the verify with {count} worker(s)"
            rate = through_service(cluster, sample.dataset, settings.compression, settings, what)
            figures.verify.append(VerifyPoint(count, per_worker, rate.examples_per_sec))


def _result(
    pipeline: PipelineFile,
    sample: _Sample,
    host: int,
    figures: _Figures,
    settings: OffloadSettings,
) -> OffloadResult:
    chosen = cores_per_worker(figures.rates)
    fitted = fit_workers(figures.verify)
    per_worker, efficiency = fitted if fitted is not None else (None, None)
    needed = None
    if per_worker is not None and efficiency is not None and efficiency > 0:
        needed = workers_needed(figures.model, per_worker, efficiency)
    ceiling = next(
        (c.examples_per_sec for c in figures.ceilings if c.compression == settings.compression),
        None,
    )
    sent = sample.compressed_bytes if settings.compression == "AUTO" else sample.raw_bytes
    network = None
    if settings.network_gbps is not None:
        network = network_ceiling(settings.network_gbps, sent, sample.examples)
    return OffloadResult(
        pipeline=str(pipeline.path),
        cut=sample.label,
        batch_examples=sample.examples,
        model_examples_per_sec=figures.model,
        host_cores=host,
        core_rates=tuple(figures.rates),
        bytes_per_batch_raw=sample.raw_bytes,
        bytes_per_batch_compressed=sample.compressed_bytes,
        ceilings=tuple(figures.ceilings),
        verify=tuple(figures.verify),
        cores_per_worker=chosen.cores,
        predicted_per_worker_examples_per_sec=chosen.examples_per_sec,
        per_worker_examples_per_sec=per_worker,
        efficiency=efficiency,
        workers_needed=needed,
        trainer_ceiling_examples_per_sec=ceiling,
        network_gbps=settings.network_gbps,
        network_ceiling_examples_per_sec=network,
        binds=None if needed is None else binding(figures.model, needed, ceiling, network),
        compression=settings.compression,
        fault=figures.fault,
    )
