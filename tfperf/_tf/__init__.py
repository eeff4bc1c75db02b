"""Everything of tfperf that touches TensorFlow and Keras directly.

TensorFlow is imported inside these functions, never at module import, so the rest of tfperf
(the report layer above all) loads without it.
"""

from __future__ import annotations

from tfperf._tf._quiet import (
    import_tensorflow_quietly,
    silenced_stderr,
)
from tfperf._tf._support import (
    apply_options,
    attach_allocator_peaks,
    check_dataset,
    check_model,
    describe_structure,
    enable_gpu_memory_growth,
    input_error_location,
    keras_train_step,
    model_input_structure,
    precision_policy,
    reset_allocator_peaks,
    short_tf_message,
    user_frames_of,
)

__all__ = [
    "apply_options",
    "attach_allocator_peaks",
    "check_dataset",
    "check_model",
    "describe_structure",
    "enable_gpu_memory_growth",
    "import_tensorflow_quietly",
    "input_error_location",
    "keras_train_step",
    "model_input_structure",
    "precision_policy",
    "reset_allocator_peaks",
    "short_tf_message",
    "silenced_stderr",
    "user_frames_of",
]
