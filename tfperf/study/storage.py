"""Where a study is kept: storage URLs (SQLite, journal files, database servers), opening them,
and messages that say why one cannot be used.
"""

from __future__ import annotations

from tfperf.study._storage import default_storage_url, open_storage, study_name_for
from tfperf.study._storage_errors import (
    StorageError,
    explain_storage_failure,
    mask_url,
    storage_file,
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
