"""The typed records a study keeps: one per trial (`TrialRecord`) and one for the study
(`StudyRecord`: references, discovery, the re-measurement, the digest of the pipeline's files).
"""

from __future__ import annotations

from tfperf.study._records import TrialRecord
from tfperf.study._study import source_changed
from tfperf.study._study_record import (
    StudyRecord,
    read_study,
    write_study,
)

__all__ = ["StudyRecord", "TrialRecord", "read_study", "source_changed", "write_study"]
