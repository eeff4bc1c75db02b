"""Hardware probes sampled in the background while a profile runs.

Every probe shares one interface (`Probe`): it opens, is sampled by a `Sampler` thread, and
closes; on a machine without the hardware or library it reports why it is off instead of
raising.

Example:
    >>> from tfperf.probes import HostProbe, NvmlProbe, Sampler
    >>> probes = [HostProbe(), NvmlProbe()]
    >>> reasons = {probe.name: probe.open() for probe in probes}  # doctest: +SKIP
"""

from __future__ import annotations

from tfperf.probes.base import Probe, RunningStats, Series
from tfperf.probes.host import HostProbe, TreeUsage, read_tree
from tfperf.probes.nvml import NvmlProbe
from tfperf.probes.sampler import Sampler
from tfperf.probes.unique import (
    MemoryPeak,
    MemorySampler,
    UniqueMemory,
    UniqueMemoryReader,
    unique_memory,
)

__all__ = [
    "HostProbe",
    "MemoryPeak",
    "MemorySampler",
    "NvmlProbe",
    "Probe",
    "RunningStats",
    "Sampler",
    "Series",
    "TreeUsage",
    "UniqueMemory",
    "UniqueMemoryReader",
    "read_tree",
    "unique_memory",
]
