from __future__ import annotations

import itertools
import logging
import os
import threading
import time

import pynvml
import pytest

from tests.deadlines import HANG_S
from tests.fakes.fake_nvml import FakeNvml, two_gpus
from tfperf.probes import HostProbe, NvmlProbe, Probe, RunningStats, Sampler, Series
from tfperf.results import TimedValue

# --- one contract, every probe ---------------------------------------------------------------

PROBES = {
    "host": HostProbe,
    "nvml-fake": lambda: NvmlProbe(two_gpus(os.getpid())),
    "nvml-fake-init-fails": lambda: NvmlProbe(
        FakeNvml([], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    ),
    "nvml-real": NvmlProbe,
}


@pytest.fixture(params=list(PROBES), ids=list(PROBES))
def probe(request, monkeypatch) -> Probe:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return PROBES[request.param]()


def test_probe_contract(probe):
    reason = probe.open()

    assert reason is None or isinstance(reason, str)
    assert probe.available == (reason is None)
    assert probe.unavailable_reason == reason
    if reason is not None:
        assert reason.strip(), f"probe {probe.name} is off without saying why"
    assert probe.name != "probe"
    probe.sample(0.0)
    probe.sample(0.05)
    probe.close()
    probe.close()
    probe.sample(0.1)


def readout(probe: Probe) -> object:
    """Everything `probe` has recorded, comparable by equality."""
    if isinstance(probe, HostProbe):
        return (probe.memory(), probe.cpu())
    if isinstance(probe, NvmlProbe):
        return probe.gpus()
    raise AssertionError(f"no readout for probe {probe.name!r}: add one to readout()")


def test_probe_contract_sampling_before_open_is_harmless(probe):
    untouched = readout(probe)
    probe.sample(0.0)
    probe.sample(0.05)
    assert readout(probe) == untouched, "a probe recorded samples before it was opened"
    probe.close()  # closing a probe that was never opened does nothing
    assert readout(probe) == untouched

    # The early calls left nothing behind: the probe still opens and then records.
    reason = probe.open()
    assert probe.available == (reason is None)
    probe.sample(0.1)
    probe.sample(0.15)
    if reason is None:
        assert readout(probe) != untouched, f"probe {probe.name} recorded nothing once open"
    else:
        assert readout(probe) == untouched, f"probe {probe.name} is off, yet recorded samples"
    probe.close()


# --- Sampler ---------------------------------------------------------------------------------


class RecordingProbe(Probe):
    name = "recording"

    def __init__(self, error: Exception | None = None) -> None:
        super().__init__()
        self.error = error
        self.times: list[float] = []
        self.lock = threading.Lock()

    def _open(self) -> str | None:
        return None

    def _sample(self, t_s: float) -> None:
        with self.lock:
            self.times.append(t_s)
        if self.error is not None:
            raise self.error


def _counting_clock():
    counter = itertools.count()
    return lambda: float(next(counter))


def test_sampler_samples_at_start_and_stop():
    probe = RecordingProbe()
    with Sampler([probe], _counting_clock(), interval_s=3600):
        assert probe.times == [0.0]
    assert probe.times == [0.0, 1.0]


def test_sampler_samples_periodically():
    probe = RecordingProbe()
    deadline = time.monotonic() + HANG_S
    with Sampler([probe], _counting_clock(), interval_s=0.005):
        while len(probe.times) < 5 and time.monotonic() < deadline:
            time.sleep(0.005)
    assert len(probe.times) >= 6
    assert probe.times == sorted(probe.times)


def test_sampler_turns_off_a_failing_probe_and_keeps_the_others(caplog):
    failing = RecordingProbe(RuntimeError("sensor fell off"))
    good = RecordingProbe()
    with caplog.at_level(logging.WARNING), Sampler([failing, good], _counting_clock(), 3600):
        pass
    assert failing.unavailable_reason == "failed while sampling: sensor fell off"
    assert failing.times == [0.0]
    assert good.times == [0.0, 1.0]
    assert "probe recording failed while sampling" in caplog.text


def test_sampler_rejects_a_non_positive_interval():
    with pytest.raises(ValueError, match=r"`interval_s > 0` must hold, but got interval_s=0"):
        Sampler([], _counting_clock(), interval_s=0)


# --- Series ----------------------------------------------------------------------------------


def _points(*times: float) -> list[TimedValue]:
    return [TimedValue(t_s=t, value=t * 10) for t in times]


def test_series_keeps_every_point_below_capacity():
    series = Series(capacity=4)
    for t in range(3):
        series.add(float(t), t * 10.0)
    assert series.points() == _points(0, 1, 2)


def test_series_halves_when_full_and_keeps_the_spread():
    series = Series(capacity=4)
    for t in range(4):
        series.add(float(t), t * 10.0)
    assert series.points() == _points(0, 2)
    for t in range(4, 9):
        series.add(float(t), t * 10.0)
    assert series.points() == _points(0, 4, 8)


def test_series_points_are_a_copy():
    series = Series(capacity=4)
    series.add(0.0, 0.0)
    series.points().clear()
    assert series.points() == _points(0)


def test_series_rejects_a_tiny_capacity():
    with pytest.raises(ValueError, match=r"`capacity >= 2` must hold, but got capacity=1"):
        Series(capacity=1)


# --- RunningStats ----------------------------------------------------------------------------


def test_running_stats_mean_and_peak():
    stats = RunningStats()
    for value in (3.0, 1.0, 2.0):
        stats.add(value)
    assert stats == RunningStats(count=3, total=6.0, peak=3.0)
    assert (stats.mean, stats.peak_or_zero) == (2.0, 3.0)


def test_running_stats_empty_is_zero():
    stats = RunningStats()
    assert (stats.count, stats.mean, stats.peak_or_zero) == (0, 0.0, 0.0)


def test_running_stats_negative_values():
    stats = RunningStats()
    stats.add(-5.0)
    stats.add(-2.0)
    assert (stats.mean, stats.peak_or_zero) == (-3.5, -2.0)
