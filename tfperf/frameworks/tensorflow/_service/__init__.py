"""tf.data service under tfperf: sizing workers (`offload`), measuring through a cluster the
user runs (`distribute`, `check_runs_on_service`), and the servers tfperf starts itself.

Built on TensorFlow's own service (`tf.data.experimental.service`: `DispatchServer`,
`WorkerServer`, `distribute()`); no worker pool of tfperf's own.
"""

from __future__ import annotations

from tfperf.frameworks.tensorflow._service._cut import Cut, check_runs_on_service, cut_dataset
from tfperf.frameworks.tensorflow._service._measure import distribute, served
from tfperf.frameworks.tensorflow._service._offload import offload
from tfperf.frameworks.tensorflow._service._servers import (
    LocalCluster,
    check_reachable,
    start_dispatcher,
    stop_all,
)

__all__ = [
    "Cut",
    "LocalCluster",
    "check_reachable",
    "check_runs_on_service",
    "cut_dataset",
    "distribute",
    "offload",
    "served",
    "start_dispatcher",
    "stop_all",
]
