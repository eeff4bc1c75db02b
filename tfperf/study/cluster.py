"""Many tuners on one study: when a silent tuner counts as gone (`Liveness`), the trials
recovered from one (`LostTrial`), and the record that names a tuner (`worker_record`).
"""

from __future__ import annotations

from tfperf.study._cluster import Liveness, LostTrial, worker_record

__all__ = ["Liveness", "LostTrial", "worker_record"]
