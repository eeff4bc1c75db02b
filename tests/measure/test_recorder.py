"""A phase's recorder: warm-up decided online, batch sizes, the measured rate so far."""

from __future__ import annotations

import pytest

from tests.fakes.clock import Batch
from tfperf.measure._analysis import WarmupRule
from tfperf.measure._recorder import PhaseRecorder, batch_examples
from tfperf.results import Phase


def test_batch_examples_reads_the_leading_dimension():
    assert batch_examples((Batch(16), Batch(3))) == 16
    assert batch_examples({"image": Batch(5)}) == 5
    assert batch_examples(7) == 1


def test_a_fixed_warmup_ends_after_its_steps_and_the_rate_counts_only_the_rest():
    recorder = PhaseRecorder(Phase.END_TO_END, warmup=2, rule=WarmupRule(), target=3)
    # Steps of 4 examples: (start, wait, compute) with the first two slow.
    steps = [(0.0, 1.0, 1.0), (2.0, 0.5, 0.5), (3.0, 0.1, 0.1), (3.2, 0.1, 0.1)]
    for start, wait, compute in steps:
        recorder.add(start, wait, compute, 4, 0)
    assert recorder.warmup_end == (2, True)
    assert recorder.measured_steps == 2
    assert recorder.measured_rate() == pytest.approx(8 / 0.4)  # 3.0 to 3.4 s
    result = recorder.finish()
    assert result is not None
    assert (result.steps, result.warmup.steps) == (2, 2)
