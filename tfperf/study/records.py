"""The typed records a study keeps: one per trial (`TrialRecord`) and one for the study
(`StudyRecord`: references, discovery, the re-measurement, the digest of the pipeline's files).
"""

from __future__ import annotations

from tfperf.study._records import (
    DUPLICATE_ROLE,
    LOCK_ROLE,
    TrialRecord,
    TrialRole,
)
from tfperf.study._study import (
    source_changed,
)
from tfperf.study._study_record import (
    RemeasureCover,
    StudyRecord,
    read_study,
    write_study,
)

__all__ = [
    "DUPLICATE_ROLE",
    "LOCK_ROLE",
    "RemeasureCover",
    "StudyRecord",
    "TrialRecord",
    "TrialRole",
    "read_study",
    "source_changed",
    "write_study",
]
