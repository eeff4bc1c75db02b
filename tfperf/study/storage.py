"""Where a study is kept: storage URLs (SQLite, journal files, database servers), opening them,
and messages that say why one cannot be used.
"""

from __future__ import annotations

from tfperf.study._storage import (
    StorageError,
    default_storage_url,
    explain_storage_failure,
    mask_url,
    open_storage,
    storage_file,
    study_name_for,
)

__all__ = [
    "StorageError",
    "default_storage_url",
    "explain_storage_failure",
    "mask_url",
    "open_storage",
    "storage_file",
    "study_name_for",
]
