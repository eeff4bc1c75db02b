"""How a process running a framework lays out its devices, and which data-parallel strategy it
trains under: plain records, so the tuner and the CLI name them without importing a framework.

Each framework reads these its own way (TensorFlow: logical CPU devices, GPU memory
configuration, a `tf.distribute` strategy).
"""

from __future__ import annotations

import dataclasses
from enum import Enum


class StrategyKind(str, Enum):
    """A data-parallel strategy tfperf can build from the command line."""

    DEFAULT = "default"  # no distribution: the framework's default
    ONE_DEVICE = "one-device"  # everything on the first GPU, else the CPU
    MIRRORED = "mirrored"  # one replica per GPU, else per logical CPU device


@dataclasses.dataclass(frozen=True)
class DeviceLayout:
    """The logical devices a process starts with; `None` leaves the framework's default.

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
