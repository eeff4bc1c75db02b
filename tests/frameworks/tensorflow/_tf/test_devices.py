"""Logical device layout and strategies (`_tf/_devices.py`), in fresh processes.

TensorFlow fixes its devices once per process, so each case runs in its own interpreter.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.deadlines import HANG_S
from tfperf.frameworks import DeviceLayout

_TWO_REPLICAS = textwrap.dedent(
    """
    import tensorflow as tf
    from tfperf.frameworks.tensorflow._tf import configure_devices, make_strategy
    from tfperf.frameworks import DeviceLayout, StrategyKind

    configure_devices(DeviceLayout(cpu_replicas=2))
    strategy = make_strategy(StrategyKind.MIRRORED)
    dataset = strategy.experimental_distribute_dataset(tf.data.Dataset.range(64).batch(8))

    @tf.function
    def step(batch):
        per_replica = strategy.run(lambda x: tf.reduce_sum(tf.cast(x, tf.float32)), (batch,))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    total = sum(float(step(batch)) for batch in dataset)
    one = make_strategy(StrategyKind.ONE_DEVICE)
    print(type(strategy).__name__, strategy.num_replicas_in_sync, int(total),
          type(one).__name__, one.num_replicas_in_sync)
    """
)

_TOO_LATE = textwrap.dedent(
    """
    import tensorflow as tf
    from tfperf.frameworks.tensorflow._tf import configure_devices
    from tfperf.frameworks import DeviceLayout
    from tfperf.errors import PipelineFileError

    tf.constant(1.0) + 1.0  # initialises the devices, as a pipeline file might on import
    try:
        configure_devices(DeviceLayout(cpu_replicas=2))
    except PipelineFileError as error:
        print("refused:", error)
    """
)


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG_S, check=True
    )
    return done.stdout.strip()


def test_two_logical_cpus_give_a_mirrored_strategy_with_two_replicas() -> None:
    assert _run(_TWO_REPLICAS).split() == [
        "MirroredStrategy",
        "2",
        str(sum(range(64))),  # every element reached one replica exactly once
        "OneDeviceStrategy",
        "1",
    ]


def test_devices_touched_before_the_layout_get_a_message_naming_the_fix() -> None:
    output = _run(_TOO_LATE)

    assert output.startswith("refused: TensorFlow had already set up its devices")
    assert "inside make_dataset() and make_model()" in output


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        ({"cpu_replicas": 0}, "cpu_replicas >= 1"),
        ({"gpu_memory_limit_mib": 0}, "gpu_memory_limit_mib >= 1"),
        ({"gpu_memory_limit_mib": 1024, "gpu_memory_growth": True}, "exclude each other"),
    ],
)
def test_layouts_tensorflow_would_refuse_are_refused_first(
    layout: dict[str, int | bool], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        DeviceLayout(**layout)  # type: ignore[arg-type]
