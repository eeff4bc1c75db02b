"""Versions and hardware of the machine that measured, recorded with every result.

Nothing here imports TensorFlow: its version comes from the installed package's metadata, so
collecting the environment stays cheap and works where TensorFlow is missing.
"""

from __future__ import annotations

import os
import platform
import socket
from importlib import metadata
from pathlib import Path

from tfperf.result import Environment

# Distributions that provide the `tensorflow` module, most common first.
_TENSORFLOW_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tensorflow-macos", "tf-nightly")
_CPUINFO = Path("/proc/cpuinfo")


def collect_environment(gpu_names: list[str]) -> Environment:
    """Describes this machine; `gpu_names` come from the GPU probe (empty without GPUs).

    Example:
        >>> env = collect_environment([])
        >>> env.cpu_count >= 1
        True
    """
    return Environment(
        tfperf_version=package_version("tfperf") or "unknown",
        tensorflow_version=tensorflow_version(),
        python_version=platform.python_version(),
        platform=platform.platform(),
        hostname=socket.gethostname(),
        cpu_count=os.cpu_count() or 1,
        cpu_model=cpu_model(),
        gpu_names=list(gpu_names),
    )


def package_version(distribution: str) -> str | None:
    """The installed version of `distribution`, or None when it is not installed."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def tensorflow_version() -> str | None:
    """TensorFlow's version from whichever distribution installed it, without importing it."""
    for distribution in _TENSORFLOW_DISTRIBUTIONS:
        version = package_version(distribution)
        if version is not None:
            return version
    return None


def cpu_model(cpuinfo: Path = _CPUINFO) -> str:
    """The CPU's marketing name, e.g. "AMD EPYC 7B13"; "unknown" when nothing says.

    Reads Linux's `/proc/cpuinfo`, then falls back to `platform.processor()`, which is often
    only the architecture but beats nothing.
    """
    return _model_from_cpuinfo(cpuinfo) or platform.processor() or "unknown"


def read_cpuinfo(cpuinfo: Path = _CPUINFO) -> dict[str, str]:
    """The first value of each `key: value` line of `/proc/cpuinfo`; empty when unreadable.

    The first processor's entries stand for all: they share model and flags in practice.
    """
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if value.strip():
            fields.setdefault(key.strip(), value.strip())
    return fields


def _model_from_cpuinfo(cpuinfo: Path) -> str | None:
    return read_cpuinfo(cpuinfo).get("model name")
