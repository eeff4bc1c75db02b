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

import logging
from collections.abc import Callable

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
    host_cores,
    spawn_workers,
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

__all__ = ["offload"]

logger = logging.getLogger(__name__)

Status = Callable[[str], None]


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
        ServiceError: the local service could not start.
    """
    dataset, _ = raw_dataset(pipeline, knobs)
    dataset = _tf.apply_options(dataset, knobs)
    check_runs_on_service(dataset, pipeline.path.name)
    cut = cut_dataset(dataset)
    batch = next(iter(cut.dataset))
    examples = batch_examples(batch)
    raw, compressed = batch_bytes(batch)
    cores = host_cores()
    sweep = [cores[:count] for count in range(1, min(len(cores), settings.max_cores or 10**6) + 1)]
    spares = min(len(cores), settings.max_workers or len(cores))
    # Every child starts now, so their TensorFlow imports overlap; each then waits, idle, for
    # its command, so the measurements run on a quiet host.
    on_status(f"Starting {len(sweep) + spares} processes (pinned measurements, workers)...")
    rate_children = [spawn_rate(pinned) for pinned in sweep]
    workers = spawn_workers(spares)
    ceilings: list[ServiceCeiling] = []
    verify: list[VerifyPoint] = []
    fault = None
    try:
        for child in [*rate_children, *workers]:
            child.answer(settings.timeout_s)
        model = settings.model_examples_per_sec
        if model is None:
            on_status("Timing the model step alone...")
            model = model_examples_per_sec()
        rates: list[CoreRate] = []
        for child in rate_children:
            count = len(child.request["cores"])
            on_status(f"Measuring the pipeline up to {cut.label} pinned to {count} core(s)...")
            rates.append(pinned_rate(child, pipeline, knobs, settings))
        chosen = cores_per_worker(rates)
        most = max(1, min(spares, len(cores) // chosen.cores))
        for extra in workers[most:]:
            extra.stop()
        try:
            _on_service(
                cut.dataset,
                batch,
                cores,
                chosen.cores,
                workers[:most],
                settings,
                ceilings,
                verify,
                on_status,
            )
        except ServiceError as error:
            if not verify and not ceilings:
                raise
            fault = str(error)
    finally:
        for child in [*rate_children, *workers]:
            child.stop()
    return _result(
        pipeline,
        cut.label,
        examples,
        model,
        len(cores),
        rates,
        (raw, compressed),
        ceilings,
        verify,
        chosen,
        settings,
        fault,
    )


def _on_service(
    dataset: object,
    batch: object,
    cores: list[int],
    per_worker: int,
    workers: list[Child],
    settings: OffloadSettings,
    ceilings: list[ServiceCeiling],
    verify: list[VerifyPoint],
    on_status: Status,
) -> None:
    """The ceilings and the verify on a local cluster, appended as they are measured."""
    with LocalCluster.start() as cluster:
        on_status("Starting a local tf.data service dispatcher and worker...")
        cluster.add_workers([cores[:per_worker]], settings.timeout_s, spares=workers[:1])
        for compression in ("AUTO", "NONE"):
            on_status(f"Measuring the trainer's ceiling through the service ({compression})...")
            ceilings.append(service_ceiling(cluster, batch, compression, settings))
        for count in range(1, len(workers) + 1):
            if count > 1:
                start = (count - 1) * per_worker
                cluster.add_workers(
                    [cores[start : start + per_worker]],
                    settings.timeout_s,
                    spares=workers[count - 1 :],
                )
            on_status(f"Verifying: the pipeline through {count} worker(s)...")
            rate = through_service(
                cluster,
                dataset,
                settings.compression,
                settings,
                f"the verify with {count} worker(s)",
            )
            verify.append(VerifyPoint(count, per_worker, rate.examples_per_sec))


def _result(
    pipeline: PipelineFile,
    cut: str,
    examples: int,
    model: float,
    host: int,
    rates: list[CoreRate],
    sizes: tuple[int, int],
    ceilings: list[ServiceCeiling],
    verify: list[VerifyPoint],
    chosen: CoreRate,
    settings: OffloadSettings,
    fault: str | None,
) -> OffloadResult:
    raw, compressed = sizes
    fitted = fit_workers(verify)
    per_worker, efficiency = fitted if fitted is not None else (None, None)
    needed = None
    if per_worker is not None and efficiency is not None and efficiency > 0:
        needed = workers_needed(model, per_worker, efficiency)
    ceiling = next(
        (c.examples_per_sec for c in ceilings if c.compression == settings.compression), None
    )
    sent = compressed if settings.compression == "AUTO" else raw
    network = (
        None
        if settings.network_gbps is None
        else network_ceiling(settings.network_gbps, sent, examples)
    )
    return OffloadResult(
        pipeline=str(pipeline.path),
        cut=cut,
        batch_examples=examples,
        model_examples_per_sec=model,
        host_cores=host,
        core_rates=tuple(rates),
        bytes_per_batch_raw=raw,
        bytes_per_batch_compressed=compressed,
        ceilings=tuple(ceilings),
        verify=tuple(verify),
        cores_per_worker=chosen.cores,
        predicted_per_worker_examples_per_sec=chosen.examples_per_sec,
        per_worker_examples_per_sec=per_worker,
        efficiency=efficiency,
        workers_needed=needed,
        trainer_ceiling_examples_per_sec=ceiling,
        network_gbps=settings.network_gbps,
        network_ceiling_examples_per_sec=network,
        binds=None if needed is None else binding(model, needed, ceiling, network),
        compression=settings.compression,
        fault=fault,
    )
