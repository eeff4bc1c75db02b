"""Zero-change mode's patch side: the calls found in a user's own files, rewritten.

A framework finds (and overrides) the tunable calls while it builds the input (for tf.data,
`tfperf.frameworks.tensorflow`'s recorder); this package reads only the sites it found and the
user's source text. `make_patch` writes chosen values back into the user's files as a unified
diff, and `patch_for` writes a whole measured configuration, with the code tfperf applied
itself (options, precision, an added prefetch) inserted where the dataset is handed over.
`callee` and `name_line` name a call in a syntax tree the way a recorder names its site.
"""

from __future__ import annotations

from tfperf.sites._callee import (
    callee,
    name_line,
)
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
    placement_problem,
)
from tfperf.sites._patch import (
    Change,
    ManualEdit,
    Patch,
    changes_between,
    inserted_prefetch,
    make_patch,
)

__all__ = [
    "Additions",
    "Anchor",
    "Change",
    "ManualEdit",
    "Patch",
    "additions_between",
    "callee",
    "changes_between",
    "describe_edit",
    "edit_sites",
    "inserted_prefetch",
    "make_patch",
    "name_line",
    "patch_for",
    "placement_problem",
    "reorder_sites",
    "unplaceable",
]
