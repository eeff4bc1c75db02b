"""A real tf.data input feeding an emulated accelerator step (issue 47, Done-when bullet 1).

The figures the issue names (~0.8 at a 1 ms step, ~0 at 20 ms) are asserted exactly on a fake
clock in `tests/measure/test_emulated.py` and measured in `benchmarks/`; here, on a real
pipeline and a shared host, only with margins no busy machine flips.
"""

from __future__ import annotations

import pytest

from tests import pipelines
from tfperf.frameworks.tensorflow import profile_pipeline
from tfperf.pipeline import load_pipeline

pytestmark = pytest.mark.tf


def test_a_5_ms_input_starves_a_1_ms_step_and_feeds_a_200_ms_one(write_pipeline):
    pipeline = load_pipeline(write_pipeline(pipelines.INPUT_ONLY_5MS), needs_step=False)
    assert pipeline.make_model is None and pipeline.make_train_step is None
    short = profile_pipeline(pipeline, steps=10, warmup=2, step_time_s=0.001)
    assert short.emulated_step_s == 0.001
    assert short.input_wait_fraction > 0.5
    # 40x the input's time: a 40 ms step (8x) was starved on a CI host running the suite on
    # every core beside other work.
    long = profile_pipeline(pipeline, steps=10, warmup=2, step_time_s=0.2)
    assert long.input_wait_fraction < 0.2
    assert long.compute_only is not None
    assert long.compute_only.compute_s / long.compute_only.steps >= 0.2  # the sleep, no model
