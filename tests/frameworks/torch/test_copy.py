"""The host-to-GPU copy timing (tfperf/frameworks/torch/_copy.py): its arithmetic on a fake
clock, and the bytes of a real batch; the CUDA copies themselves are checked by
tools/verify_torch_gpu.py on a GPU."""

from __future__ import annotations

import pytest

from tfperf.frameworks.torch._copy import host_copies, median_seconds, time_copies

torch = pytest.importorskip("torch")


class Clock:
    """A clock that each copy advances by the next of `durations`."""

    def __init__(self, durations: list[float]) -> None:
        self.now, self.durations = 0.0, iter(durations)

    def __call__(self) -> float:
        return self.now

    def copy(self) -> None:
        self.now += next(self.durations)


def test_each_way_is_the_median_after_an_untimed_first_copy() -> None:
    # The first of each way (100 s) is the untimed warm-up; then 3, 1, 2 and 9, 5, 7.
    clock = Clock([100.0, 3.0, 1.0, 2.0, 100.0, 9.0, 5.0, 7.0])

    timing = time_copies(4096, clock.copy, clock.copy, repeats=3, clock=clock)

    assert (timing.bytes_per_batch, timing.pageable_s, timing.pinned_s) == (4096, 2.0, 7.0)


def test_repeats_below_one_are_refused_with_the_value() -> None:
    with pytest.raises(ValueError, match="repeats=0"):
        median_seconds(lambda: None, repeats=0)


def test_a_batch_counts_the_bytes_of_its_host_tensors() -> None:
    batch = {"image": torch.zeros(4, 3, 8, 8), "label": (torch.zeros(4, dtype=torch.int64), "x")}
    calls = iter(range(100))

    timing = host_copies(batch, device="cpu", repeats=2, clock=lambda: float(next(calls)))

    assert timing is not None
    assert timing.bytes_per_batch == 4 * 3 * 8 * 8 * 4 + 4 * 8
    assert (timing.pageable_s, timing.pinned_s) == (1.0, 1.0)
    assert host_copies(["no", "tensors"], device="cpu") is None
