"""How the devices of one tfperf process are laid out: CPU replicas, GPU memory, strategies.

TensorFlow fixes its logical devices the first time it touches them, so `configure_devices`
runs before anything builds a dataset or a model, in a process tfperf owns (a profile or a trial
child). Several logical CPU devices give a real `MirroredStrategy` with N replicas on any
machine, which is how multi-device code is profiled and tested without N GPUs.
"""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import TYPE_CHECKING

from tfperf.errors import PipelineFileError

if TYPE_CHECKING:
    import tensorflow as tf


class StrategyKind(str, Enum):
    """A `tf.distribute.Strategy` tfperf can build from the command line."""

    DEFAULT = "default"  # no distribution: TensorFlow's default strategy
    ONE_DEVICE = "one-device"  # everything on the first GPU, else the CPU
    MIRRORED = "mirrored"  # one replica per GPU, else per logical CPU device


@dataclasses.dataclass(frozen=True)
class DeviceLayout:
    """The logical devices a process starts with; `None` leaves TensorFlow's default.

    Attributes:
        cpu_replicas: split the CPU into this many logical devices (>= 1).
        gpu_memory_limit_mib: give each visible GPU one logical device of this many MiB.
        gpu_memory_growth: allocate GPU memory as needed (True) or up front (False).
    """

    cpu_replicas: int | None = None
    gpu_memory_limit_mib: int | None = None
    gpu_memory_growth: bool | None = None

    def __post_init__(self) -> None:
        if self.cpu_replicas is not None and self.cpu_replicas < 1:
            raise ValueError(f"`cpu_replicas >= 1` must hold, but got {self.cpu_replicas}")
        if self.gpu_memory_limit_mib is not None and self.gpu_memory_limit_mib < 1:
            raise ValueError(
                f"`gpu_memory_limit_mib >= 1` must hold, but got {self.gpu_memory_limit_mib}"
            )
        if self.gpu_memory_limit_mib is not None and self.gpu_memory_growth:
            raise ValueError(
                "a GPU memory limit and memory growth exclude each other in TensorFlow: "
                "choose one of --gpu-memory-limit and --gpu-memory-growth on"
            )


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
