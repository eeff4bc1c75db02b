"""tfperf's default GPU memory growth gives way to a limit or growth the user chose
(`gpu_memory_configured` in tfperf/frameworks/tensorflow/_tf/_devices.py,
`enable_gpu_memory_growth` in _support.py).

This machine has no GPU: TensorFlow's GPU list and `set_memory_growth` are replaced by recorders,
so the test sees which calls tfperf would make on one.
"""

from __future__ import annotations

import pytest
import tensorflow as tf

from tfperf.frameworks import DeviceLayout
from tfperf.frameworks.tensorflow._tf import _devices, configure_devices, enable_gpu_memory_growth


@pytest.fixture
def one_fake_gpu(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """A GPU TensorFlow lists, and the `set_memory_growth` calls made on it."""
    gpu = tf.config.PhysicalDevice(name="/physical_device:GPU:0", device_type="GPU")
    calls: list[tuple[str, bool]] = []
    real_list = tf.config.list_physical_devices

    def list_devices(kind: str | None = None) -> list[tf.config.PhysicalDevice]:
        return [gpu] if kind == "GPU" else real_list(kind)

    monkeypatch.setattr(tf.config, "list_physical_devices", list_devices)
    monkeypatch.setattr(
        tf.config.experimental,
        "set_memory_growth",
        lambda device, enable: calls.append((device.name, enable)),
    )
    monkeypatch.setattr(_devices, "_APPLIED", [])
    return calls


def test_without_a_choice_tfperf_turns_growth_on(one_fake_gpu: list[tuple[str, bool]]) -> None:
    enable_gpu_memory_growth()

    assert one_fake_gpu == [("/physical_device:GPU:0", True)]


def test_growth_off_from_the_command_line_is_not_overridden(
    one_fake_gpu: list[tuple[str, bool]],
) -> None:
    configure_devices(DeviceLayout(gpu_memory_growth=False))
    enable_gpu_memory_growth()

    assert one_fake_gpu == [("/physical_device:GPU:0", False)]
    assert _devices.gpu_memory_configured()


def test_a_memory_limit_is_not_overridden_by_growth(
    one_fake_gpu: list[tuple[str, bool]], monkeypatch: pytest.MonkeyPatch
) -> None:
    limits: list[list[tf.config.LogicalDeviceConfiguration]] = []
    monkeypatch.setattr(
        tf.config,
        "set_logical_device_configuration",
        lambda device, configs: limits.append(configs),
    )

    configure_devices(DeviceLayout(gpu_memory_limit_mib=2048))
    enable_gpu_memory_growth()

    assert [[config.memory_limit for config in configs] for configs in limits] == [[2048]]
    assert one_fake_gpu == []
