"""A profile with a GPU measured through the real NVML probe on the fake NVML, for the tests of
the GPU memory advice (report, CLI)."""

from __future__ import annotations

import dataclasses
import os

from tests.fakes.fake_nvml import FakeGpu, FakeNvml, process
from tests.reports import fake_profile
from tfperf.probes import NvmlProbe
from tfperf.results import ProfileResult

MIB = 1 << 20
GIB = 1 << 30
#: What the advice says for that GPU: 4426 MiB peak, 512 MiB context, 20% headroom.
FITS = "14 processes of this size fit on NVIDIA H100 80GB HBM3 (81,920 MiB)"


def measured_on_fake_gpu() -> ProfileResult:
    """A profile whose GPU figures come from the NVML probe: this process peaked at 4426 MiB.

    Callers must unset CUDA_VISIBLE_DEVICES (the probe honours it).
    """
    me = os.getpid()
    fake = FakeNvml(
        [
            FakeGpu(
                name=b"NVIDIA H100 80GB HBM3",
                uuid="GPU-cccc3333-0000-0000-0000-000000000000",
                total=80 * GIB,
                used=[1 * GIB, 5 * GIB, 4 * GIB],
                util=[10, 90, 50],
                processes=[[process(me, GIB)], [process(me, 4426 * MIB)], [process(me, 3 * GIB)]],
            )
        ]
    )
    probe = NvmlProbe(fake)
    assert probe.open() is None
    for step in range(3):
        fake.step = step
        probe.sample(float(step))
    probe.close()
    return dataclasses.replace(fake_profile(), gpus=probe.gpus(), gpu_unavailable_reason=None)
