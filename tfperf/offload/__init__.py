"""Sizing tf.data service for a pipeline: how many input workers of how many cores feed a model.

Neutral records and rules: what `tfperf offload` measured (`OffloadResult`) and how the answer
follows from it (`cores_per_worker`, `fit_workers`, `workers_needed`, `binding`). The measuring
itself is the framework's (`Framework.service()`); this package imports no framework, so a
saved result renders anywhere.

Example:
    >>> from tfperf.offload import VerifyPoint, fit_workers
    >>> fit_workers([VerifyPoint(1, 1, 100.0), VerifyPoint(2, 1, 180.0)])
    (100.0, 0.92)
"""

from __future__ import annotations

from tfperf.offload._plan import (
    binding,
    cores_per_worker,
    fit_workers,
    network_ceiling,
    workers_needed,
)
from tfperf.offload._result import (
    Binding,
    CoreRate,
    OffloadResult,
    ServiceCeiling,
    VerifyPoint,
)
from tfperf.offload._settings import (
    OffloadSettings,
)

__all__ = [
    "Binding",
    "CoreRate",
    "OffloadResult",
    "OffloadSettings",
    "ServiceCeiling",
    "VerifyPoint",
    "binding",
    "cores_per_worker",
    "fit_workers",
    "network_ceiling",
    "workers_needed",
]
