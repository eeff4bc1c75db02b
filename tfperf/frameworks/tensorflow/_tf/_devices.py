"""How the devices of one tfperf process are laid out: CPU replicas, GPU memory, strategies.

TensorFlow fixes its logical devices the first time it touches them, so `configure_devices`
runs before anything builds a dataset or a model, in a process tfperf owns (a profile or a trial
child). Several logical CPU devices give a real `MirroredStrategy` with N replicas on any
machine, which is how multi-device code is profiled and tested without N GPUs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tfperf.errors import PipelineFileError
from tfperf.frameworks import DeviceLayout, StrategyKind

if TYPE_CHECKING:
    import tensorflow as tf


#: The layout `configure_devices` last applied in this process; empty until it runs.
_APPLIED: list[DeviceLayout] = []


def gpu_memory_configured() -> bool:
    """Whether this process's layout set a GPU memory limit or growth itself.

    Then tfperf's own default (memory growth in the processes it owns) must not override it.
    """
    return any(
        layout.gpu_memory_limit_mib is not None or layout.gpu_memory_growth is not None
        for layout in _APPLIED
    )


def cpu_replicas() -> int:
    """The logical CPU devices this process's layout split the CPU into (`--cpu-replicas`); 1
    where it split none."""
    return max((layout.cpu_replicas or 1 for layout in _APPLIED), default=1)


def configure_devices(layout: DeviceLayout) -> None:
    """Applies `layout` before TensorFlow initialises its devices.

    Raises:
        PipelineFileError: TensorFlow already initialised its devices in this process (the pipeline
            file touched a device when it was imported).
    """
    import tensorflow as tf

    _APPLIED[:] = [layout]
    try:
        if layout.cpu_replicas is not None:
            cpu = tf.config.list_physical_devices("CPU")[0]
            configs = [tf.config.LogicalDeviceConfiguration()] * layout.cpu_replicas
            tf.config.set_logical_device_configuration(cpu, configs)
        for gpu in tf.config.list_physical_devices("GPU"):
            _configure_gpu(gpu, layout)
    except RuntimeError as error:
        raise PipelineFileError(
            f"TensorFlow had already set up its devices ({error}), so tfperf cannot lay them "
            "out: the pipeline file must not create tensors, datasets or models when it is "
            "imported; build them inside make_dataset() and make_model()."
        ) from None


def _configure_gpu(gpu: tf.config.PhysicalDevice, layout: DeviceLayout) -> None:
    import tensorflow as tf

    if layout.gpu_memory_limit_mib is not None:
        limit = tf.config.LogicalDeviceConfiguration(memory_limit=layout.gpu_memory_limit_mib)
        tf.config.set_logical_device_configuration(gpu, [limit])
    elif layout.gpu_memory_growth is not None:
        tf.config.experimental.set_memory_growth(gpu, layout.gpu_memory_growth)


def make_strategy(kind: StrategyKind) -> tf.distribute.Strategy:
    """The strategy `kind` names, over the GPUs if there are any, else the logical CPUs."""
    import tensorflow as tf

    gpus = [device.name for device in tf.config.list_logical_devices("GPU")]
    cpus = [device.name for device in tf.config.list_logical_devices("CPU")]
    if kind is StrategyKind.ONE_DEVICE:
        return tf.distribute.OneDeviceStrategy((gpus or cpus)[0])
    if kind is StrategyKind.MIRRORED:
        return tf.distribute.MirroredStrategy(devices=gpus or cpus)
    return tf.distribute.get_strategy()
