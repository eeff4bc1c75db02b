"""The TensorFlow implementation of `tfperf.frameworks.Framework` (tf.data, Keras).

The registry imports this module lazily (`tfperf.frameworks.get("tensorflow")`); it imports
TensorFlow itself only inside the methods that build or measure.
"""

from __future__ import annotations

from tfperf.frameworks.tensorflow._framework import (
    FRAMEWORK,
    TensorFlow,
    TensorFlowSites,
    synchronise,
)

__all__ = ["FRAMEWORK", "TensorFlow", "TensorFlowSites", "synchronise"]
