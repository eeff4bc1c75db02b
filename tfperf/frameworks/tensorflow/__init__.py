"""The TensorFlow implementation of `tfperf.frameworks.Framework` (tf.data, Keras).

Everything of measuring that is tf.data's own lives here: building a pipeline file for knobs
and profiling it (`profile_pipeline`), recovering the dataset's stages and measuring each alone
(`analyse_stages`), reading AUTOTUNE's choices, distributing under a strategy, discovering a
plain file's or script's call sites (`discover_sites`) and timing the model alone
(`probe_training`). The registry imports this module lazily
(`tfperf.frameworks.get("tensorflow")`); it imports TensorFlow itself only inside the functions
that build or measure.

Zero-change mode's recorder (`_recording`: the tf.data calls of the user's files, found and
overridden while the dataset is built) lives here; `tfperf.sites` patches what it found. Every
touch of TensorFlow's private API is in `_tf`, private to this package.
"""

from __future__ import annotations

from tfperf.frameworks.tensorflow._discover import (
    discover_sites,
)
from tfperf.frameworks.tensorflow._framework import (
    FRAMEWORK,
    TensorFlow,
    TensorFlowSites,
)
from tfperf.frameworks.tensorflow._runner import (
    profile_pipeline,
)
from tfperf.frameworks.tensorflow._stages import (
    analyse_stages,
)
from tfperf.frameworks.tensorflow._training import (
    probe_training,
)

__all__ = [
    "FRAMEWORK",
    "TensorFlow",
    "TensorFlowSites",
    "analyse_stages",
    "discover_sites",
    "probe_training",
    "profile_pipeline",
]
