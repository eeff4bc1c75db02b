"""Everything of tfperf that touches TensorFlow and Keras directly, private API above all.

TensorFlow is imported inside these functions, never at module import, so the rest of tfperf
(the report layer above all) loads without it. Every private name of TensorFlow that tfperf
relies on (a `tensorflow.python` module, a `_private` attribute or class of tf.data) is used
here and nowhere else, and `tests/_tf/test_internals.py` pins each against the installed
TensorFlow: an upgrade that moves one fails there, by name.
"""

from __future__ import annotations

from tfperf._tf._datasets import (
    FUNCTION_ATTRIBUTES,
    PARAMETER_ATTRIBUTES,
    V1_ADAPTER,
    added_by_tf_data,
    cardinality,
    dataset_options,
    generator_function,
    inner_datasets,
    inputs,
    is_tf_data_function,
    key_function,
    method_of,
    parameters,
    reader_in,
    tensorflow_dir,
    traced_graphs,
    unwrap_v1,
    user_function,
    walk_inputs,
)
from tfperf._tf._devices import (
    DeviceLayout,
    StrategyKind,
    configure_devices,
    make_strategy,
)
from tfperf._tf._intercept import (
    intercept,
    intercept_v1,
    intercepted,
    patch_target,
    patch_target_v1,
    patched,
    traced_stack,
)
from tfperf._tf._methods import (
    METHODS,
    NOT_STAGES,
    RESOLVED_AT_START,
    Method,
    fused_map_and_batch,
    method_named,
    method_of_class,
    model_argument,
    node_kinds,
    resolved_arguments,
)
from tfperf._tf._model import (
    ModelNode,
    ModelParameter,
    model_nodes,
)
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
    "FUNCTION_ATTRIBUTES",
    "METHODS",
    "NOT_STAGES",
    "PARAMETER_ATTRIBUTES",
    "RESOLVED_AT_START",
    "V1_ADAPTER",
    "DeviceLayout",
    "Method",
    "ModelNode",
    "ModelParameter",
    "StrategyKind",
    "added_by_tf_data",
    "apply_options",
    "attach_allocator_peaks",
    "cardinality",
    "check_dataset",
    "check_model",
    "configure_devices",
    "dataset_options",
    "describe_structure",
    "enable_gpu_memory_growth",
    "fused_map_and_batch",
    "generator_function",
    "import_tensorflow_quietly",
    "inner_datasets",
    "input_error_location",
    "inputs",
    "intercept",
    "intercept_v1",
    "intercepted",
    "is_tf_data_function",
    "keras_train_step",
    "key_function",
    "make_strategy",
    "method_named",
    "method_of",
    "method_of_class",
    "model_argument",
    "model_input_structure",
    "model_nodes",
    "node_kinds",
    "parameters",
    "patch_target",
    "patch_target_v1",
    "patched",
    "precision_policy",
    "reader_in",
    "reset_allocator_peaks",
    "resolved_arguments",
    "short_tf_message",
    "silenced_stderr",
    "tensorflow_dir",
    "traced_graphs",
    "traced_stack",
    "unwrap_v1",
    "user_frames_of",
    "user_function",
    "walk_inputs",
]
