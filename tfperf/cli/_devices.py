"""The device flags `tfperf profile` and `tfperf tune` share: strategy and logical devices.

`add_device_arguments` adds them to a command's parser; `device_options` turns the parsed flags
into the `DeviceLayout` a measuring child starts with and the `StrategyKind` it builds (None:
the pipeline file's own `make_strategy()`, else no strategy).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from tfperf.cli.base import positive_int
from tfperf.frameworks import DeviceLayout, StrategyKind

if TYPE_CHECKING:
    from tfperf.pipeline import PipelineFile

__all__ = ["add_device_arguments", "device_options", "gpu_memory_fixes"]


def add_device_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds `--strategy`, `--cpu-replicas` and the GPU memory flags (a group of their own)."""
    group = parser.add_argument_group("devices")
    group.add_argument(
        "--strategy",
        type=StrategyKind,
        choices=list(StrategyKind),
        default=None,
        metavar="{" + ",".join(kind.value for kind in StrategyKind) + "}",
        help="train under this tf.distribute strategy: mirrored (one replica per GPU, else per "
        "logical CPU device), one-device or default (none). Default: the pipeline file's "
        "make_strategy() if it defines one, else mirrored when --cpu-replicas is above 1, "
        "else none. See docs/multi-device.md",
    )
    group.add_argument(
        "--cpu-replicas",
        type=positive_int,
        default=None,
        metavar="N",
        help="split the CPU into N logical devices, so a mirrored strategy has N replicas on a "
        "machine without GPUs (default: one CPU device)",
    )
    add_gpu_memory_arguments(group)


def add_gpu_memory_arguments(group: argparse._ArgumentGroup) -> None:
    """Adds `--gpu-memory-limit` and `--gpu-memory-growth`, which exclude each other."""
    memory = group.add_mutually_exclusive_group()
    memory.add_argument(
        "--gpu-memory-limit",
        type=positive_int,
        default=None,
        metavar="MIB",
        help="run on a logical GPU device of MIB MiB (tf.config.set_logical_device_configuration),"
        " as one of several processes sharing the GPU would; an allocation past it fails as out "
        "of memory, and tune records such a trial as over budget. Excludes --gpu-memory-growth. "
        "See docs/gpu-memory.md",
    )
    memory.add_argument(
        "--gpu-memory-growth",
        type=_on_off,
        default=None,
        metavar="{on,off}",
        help="on: TensorFlow takes GPU memory as it needs it; off: it reserves nearly all of it "
        "at start (TensorFlow's own default). Default: tfperf turns growth on in the processes "
        "it measures, and `tune` also searches it as the gpu_memory_growth knob when a GPU is "
        "present. Excludes --gpu-memory-limit",
    )


def gpu_memory_fixes(args: argparse.Namespace) -> dict[str, Any]:
    """The `gpu_memory_growth` knob pinned when the command line already decides GPU memory.

    Under `--gpu-memory-limit` growth does not apply, and `--gpu-memory-growth` sets it for
    every trial: searching the knob then would only repeat trials. `--fix` still wins.
    """
    if getattr(args, "gpu_memory_limit", None) is not None:
        return {"gpu_memory_growth": None}
    growth = getattr(args, "gpu_memory_growth", None)
    return {} if growth is None else {"gpu_memory_growth": growth}


def _on_off(text: str) -> bool:
    if text.strip().lower() in ("on", "off"):
        return text.strip().lower() == "on"
    raise argparse.ArgumentTypeError(f"expected on or off, but got {text!r}")


def device_options(
    args: argparse.Namespace, pipeline: PipelineFile | None = None
) -> tuple[DeviceLayout, StrategyKind | None]:
    """The layout and strategy the parsed device flags ask for.

    `--cpu-replicas N` above 1 with no `--strategy` means mirrored, since N logical devices
    exist only to hold N replicas; unless `pipeline` brings its own strategy (a script builds
    one, or the file defines `make_strategy()`), which then trains over those devices: a
    second strategy of tfperf's around a script's own would be refused by TensorFlow.
    """
    replicas: int | None = getattr(args, "cpu_replicas", None)
    strategy: StrategyKind | None = getattr(args, "strategy", None)
    implied = replicas is not None and replicas > 1
    if strategy is None and implied and not (pipeline is not None and pipeline.owns_strategy):
        strategy = StrategyKind.MIRRORED
    layout = DeviceLayout(
        cpu_replicas=replicas,
        gpu_memory_limit_mib=getattr(args, "gpu_memory_limit", None),
        gpu_memory_growth=getattr(args, "gpu_memory_growth", None),
    )
    return layout, strategy
