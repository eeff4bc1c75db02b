"""The device flags `tfperf profile` and `tfperf tune` share: strategy and logical devices.

`add_device_arguments` adds them to a command's parser; `device_options` turns the parsed flags
into the `DeviceLayout` a measuring child starts with and the `StrategyKind` it builds (None:
the pipeline file's own `make_strategy()`, else no strategy). `check_cpu_replicas` refuses a
replica count the batch cannot feed and `note_gpu_flags` says when the GPU flags do nothing.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from tfperf.cli.base import positive_int
from tfperf.errors import KnobError
from tfperf.frameworks import DeviceLayout, StrategyKind
from tfperf.knobs import KNOBS

if TYPE_CHECKING:
    from tfperf.knobs import Knobs
    from tfperf.pipeline import PipelineFile


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
        "machine without GPUs; a script must build its model under a strategy of its own "
        "(default: one CPU device)",
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


def gpu_memory_fixes(args: argparse.Namespace, *, has_gpu: bool = True) -> dict[str, Any]:
    """The `gpu_memory_growth` knob pinned when the command line already decides GPU memory.

    Under `--gpu-memory-limit` growth does not apply, and `--gpu-memory-growth` sets it for
    every trial: searching the knob then would only repeat trials. `--fix` still wins.
    `tfperf profile` applies the same pins to the knobs it measures, with `has_gpu` False on a
    machine without a GPU, where neither flag applies: its printed configuration then says
    what ran, not what was asked.
    """
    knob = KNOBS.gpu_memory_growth.name
    limit, growth = gpu_flags(args)
    if limit is None and growth is None:
        return {}
    if limit is not None or not has_gpu:
        return {knob: None}
    return {knob: growth}


def gpu_flags(args: argparse.Namespace) -> tuple[int | None, bool | None]:
    """`--gpu-memory-limit` and `--gpu-memory-growth` as parsed; None where a command has none."""
    return getattr(args, "gpu_memory_limit", None), getattr(args, "gpu_memory_growth", None)


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
    return DeviceLayout(replicas, *gpu_flags(args)), strategy


def check_device_flags(args: argparse.Namespace, pipeline: PipelineFile, knobs: Knobs) -> bool:
    """Says which GPU flags this machine ignores, then refuses replicas that `knobs`' batch
    cannot feed (`check_cpu_replicas`); returns whether the machine has a GPU."""
    from tfperf.hardware import detect_machine

    machine = detect_machine()
    note_gpu_flags(args, has_gpu=machine.has_gpu)
    check_cpu_replicas(args, pipeline, knobs, machine.cpu_count)
    return machine.has_gpu


def note_gpu_flags(args: argparse.Namespace, *, has_gpu: bool | None = None) -> None:
    """Says once on stderr why `--gpu-memory-limit` or `--gpu-memory-growth` does nothing
    when this machine has no GPU (None: look), instead of accepting the flag in silence."""
    limit, growth = gpu_flags(args)
    if (limit is None and growth is None) or _gpu_present(has_gpu):
        return
    if limit is not None:
        flag = f"--gpu-memory-limit {limit}"
    else:
        flag = f"--gpu-memory-growth {'on' if growth else 'off'}"
    print(
        f"Note: {flag} has no effect here: this machine has no GPU that TensorFlow can use, "
        "so every measurement runs on the CPU.",
        file=sys.stderr,
    )


def _gpu_present(has_gpu: bool | None) -> bool:
    if has_gpu is not None:
        return has_gpu
    from tfperf.hardware import detect_machine

    return detect_machine().has_gpu


def check_cpu_replicas(
    args: argparse.Namespace, pipeline: PipelineFile, knobs: Knobs, cpu_count: int
) -> None:
    """Refuses `--cpu-replicas` above the global batch; notes a count above the CPUs.

    A mirrored step (tfperf's, or the file's own `make_strategy()`) splits each global batch
    over the replicas: with fewer examples than replicas some get none, and TensorFlow's step
    then waits for them forever. Only a file whose `make_dataset` reads the knobs has a batch
    tfperf knows before measuring.

    Raises:
        KnobError: `batch_size` is below the replica count (exit status 2).
    """
    from tfperf.pipeline import PipelineKind

    replicas: int | None = getattr(args, "cpu_replicas", None)
    if replicas is None or replicas < 2:
        return
    strategy = device_options(args, pipeline)[1]
    split = strategy is StrategyKind.MIRRORED or (strategy is None and pipeline.owns_strategy)
    batch = knobs.batch_size
    if split and pipeline.kind is PipelineKind.KNOBS and batch < replicas:
        raise KnobError(
            f"--cpu-replicas {replicas} splits each global batch of batch_size={batch} over "
            f"{replicas} replicas, so some replicas get no examples and the step waits for "
            f"them forever. Give --cpu-replicas {batch} or fewer, or --set "
            f"batch_size={replicas} or more."
        )
    if replicas > cpu_count:
        print(
            f"Note: --cpu-replicas {replicas} is more than this machine's {cpu_count} CPUs: "
            "the replicas take turns on the same cores, so each step is slower and the "
            "figures show the input's scaling, not more compute.",
            file=sys.stderr,
        )
