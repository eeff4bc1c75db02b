"""Zero-change mode: the tf.data calls in a user's own files, recorded, overridden and patched.

`recording` finds (and overrides) the tunable calls while a dataset is built; `make_patch`
writes chosen values back into the user's files as a unified diff.
"""

from __future__ import annotations

from tfperf.sites._patch import (
    Change,
    ManualEdit,
    Patch,
    changes_between,
    make_patch,
)
from tfperf.sites._recording import (
    Recorder,
    recording,
)

__all__ = [
    "Change",
    "ManualEdit",
    "Patch",
    "Recorder",
    "changes_between",
    "make_patch",
    "recording",
]
