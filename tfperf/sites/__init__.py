"""Zero-change mode: the tf.data calls in a user's own files, recorded, overridden and patched.

`recording` finds (and overrides) the tunable calls while a dataset is built; `make_patch`
writes chosen values back into the user's files as a unified diff, and `patch_for` writes a
whole measured configuration, with the code tfperf applied itself (options, precision, an
added prefetch) inserted where the dataset is handed over.
"""

from __future__ import annotations

from tfperf.sites._edit_text import describe_edit
from tfperf.sites._handover import (
    additions_between,
    edit_sites,
    patch_for,
    reorder_sites,
    unplaceable,
)
from tfperf.sites._insert import (
    Additions,
    Anchor,
)
from tfperf.sites._patch import (
    Change,
    ManualEdit,
    Patch,
    changes_between,
    inserted_prefetch,
    make_patch,
)
from tfperf.sites._recording import (
    Recorder,
    recording,
)

__all__ = [
    "Additions",
    "Anchor",
    "Change",
    "ManualEdit",
    "Patch",
    "Recorder",
    "additions_between",
    "changes_between",
    "describe_edit",
    "edit_sites",
    "inserted_prefetch",
    "make_patch",
    "patch_for",
    "recording",
    "reorder_sites",
    "unplaceable",
]
