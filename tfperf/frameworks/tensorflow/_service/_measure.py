"""The measurements `tfperf offload` combines, each one small function.

- `pinned_rate`: the pipeline up to the cut, alone in a child process pinned to c cores;
- `batch_bytes`: one batch at the cut, raw and as tf.data service compresses it;
- `service_ceiling`: the trainer reading one cached batch through the local service;
- `through_service`: the real cut pipeline read through the local service's workers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tfperf.frameworks.tensorflow._service._reading import Rate, read_watched
from tfperf.frameworks.tensorflow._service._servers import Child, LocalCluster
from tfperf.knobs import Knobs
from tfperf.offload import CoreRate, OffloadSettings, ServiceCeiling
from tfperf.pipeline import PipelineFile


def spawn_rate(cores: Sequence[int]) -> Child:
    """A child pinned to `cores` that imports TensorFlow and waits for `pinned_rate`."""
    return Child("rate", {"cores": list(cores)}, f"measurement on {len(cores)} pinned core(s)")


def pinned_rate(
    child: Child,
    pipeline: PipelineFile,
    knobs: Knobs,
    settings: OffloadSettings,
    cores: Sequence[int] | None = None,
) -> CoreRate:
    """The cut pipeline's rate in `child` (imported): a child from `spawn_rate`, which then
    exits, or a worker not yet serving (`spawn_workers`), pinned to `cores`, which stays."""
    pinned = list(child.request["cores"] if cores is None else cores)
    child.send(
        {
            "pipeline": str(pipeline.path),
            "argv": list(pipeline.argv),
            "knobs": knobs.to_dict(),
            "seconds": settings.seconds,
            "warmup_s": settings.warmup_s,
            "cores": pinned,
        }
    )
    try:
        answer = child.answer(settings.timeout_s + settings.seconds + settings.warmup_s)
    finally:
        if cores is None:
            child.stop()
    return CoreRate(
        cores=len(pinned),
        examples_per_sec=float(answer["examples_per_sec"]),
        batches_per_sec=float(answer["batches_per_sec"]),
    )


def batch_bytes(batch: Any) -> tuple[int, int]:
    """(raw, compressed) bytes of one batch: its tensors' bytes, and the element tf.data
    service sends with compression on (snappy, `CompressElement`, serialised)."""
    import tensorflow as tf

    leaves = tf.nest.flatten(batch)
    raw = sum(_nbytes(leaf) for leaf in leaves)
    compressed = tf.raw_ops.CompressElement(components=leaves)
    return raw, len(tf.io.serialize_tensor(compressed).numpy())


def _nbytes(leaf: Any) -> int:
    value = leaf.numpy()
    if value.dtype == object:  # strings: their bytes
        return int(sum(len(item) for item in value.ravel()))
    return int(value.nbytes)


def distribute(
    dataset: Any,
    target: str,
    *,
    compression: str = "AUTO",
    processing_mode: str = "parallel_epochs",
    job_name: str | None = None,
    max_outstanding_requests: int | None = None,
    target_workers: str = "AUTO",
) -> Any:
    """`dataset` read through the tf.data service at `target`, with a local prefetch after it."""
    import tensorflow as tf

    served = dataset.apply(
        tf.data.experimental.service.distribute(
            processing_mode=processing_mode,
            service=target,
            job_name=job_name,
            max_outstanding_requests=max_outstanding_requests,
            compression=None if compression == "NONE" else compression,
            target_workers=target_workers,
        )
    )
    return served.prefetch(tf.data.AUTOTUNE)


def service_ceiling(
    cluster: LocalCluster, batch: Any, compression: str, settings: OffloadSettings
) -> ServiceCeiling:
    """The trainer reading one cached batch through `cluster`, with `compression`."""
    import tensorflow as tf

    cached = tf.data.Dataset.from_tensors(batch).repeat()
    rate = through_service(cluster, cached, compression, settings, f"the ceiling ({compression})")
    return ServiceCeiling(compression, rate.examples_per_sec, rate.batches_per_sec)


def through_service(
    cluster: LocalCluster, dataset: Any, compression: str, settings: OffloadSettings, what: str
) -> Rate:
    """`dataset` (repeated) read through `cluster`'s workers for a measured window."""
    served = distribute(dataset.repeat(), cluster.dispatcher.target, compression=compression)
    return read_watched(
        served,
        seconds=settings.seconds,
        warmup_s=settings.warmup_s,
        timeout_s=settings.timeout_s,
        fault=cluster.fault,
        what=what,
    )


def served(dataset: Any, knobs: Knobs, file_name: str) -> Any:
    """`dataset` read through the tf.data service at `knobs.service`, cut after its last
    non-prefetch stage, with the service knobs and the options applied on both sides.

    Raises:
        PipelineFileError: a stage cannot run on a service worker.
    """
    from tfperf.frameworks.tensorflow import _tf
    from tfperf.frameworks.tensorflow._service._cut import check_runs_on_service, cut_dataset

    assert knobs.service is not None
    check_runs_on_service(dataset, file_name)
    cut = _tf.apply_options(cut_dataset(dataset).dataset, knobs)
    compression, mode, target = (
        knobs.service_compression,
        knobs.service_processing_mode,
        knobs.service_target_workers,
    )
    through = distribute(
        cut,
        knobs.service,
        compression="AUTO" if compression is None else compression.value.upper(),
        processing_mode="parallel_epochs" if mode is None else mode.value,
        job_name=knobs.service_job_name,
        max_outstanding_requests=knobs.service_max_outstanding_requests,
        target_workers="AUTO" if target is None else target.value.upper(),
    )
    return _tf.apply_options(through, knobs)
