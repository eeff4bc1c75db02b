"""The RAM budget prices a configuration by the baseline's buffers before it runs."""

from __future__ import annotations

import dataclasses

from tests.reports import fake_profile
from tfperf.knobs import AUTOTUNE, Knobs
from tfperf.results import HostMemory
from tfperf.results.stages import (
    BufferHold,
    BufferKind,
    LoaderReport,
    SizeSource,
    WorkerMemory,
    memory_account,
)
from tfperf.tuner._ram import predicted_rss_bytes, ram_problem

MIB = 2**20
BASELINE = Knobs(batch_size=32, shuffle_buffer=1024, prefetch=2)


def _baseline():
    shuffle = BufferHold(
        "shuffle(1024)", BufferKind.SHUFFLE, None, 1024, 1.0 * MIB, SizeSource.SPEC
    )
    prefetch = BufferHold(
        "prefetch(2)", BufferKind.PREFETCH, None, 2, 32.0 * MIB, SizeSource.SPEC, batched=True
    )
    host = HostMemory(2048 * MIB, 1900 * MIB, 16384 * MIB, 8192 * MIB, [])
    return dataclasses.replace(
        fake_profile(),
        memory=memory_account([shuffle, prefetch], 2048 * MIB, None),
        host_memory=host,
    )


def test_the_baseline_peak_moves_by_what_its_buffers_would_hold_more():
    baseline = _baseline()
    assert predicted_rss_bytes(baseline, BASELINE, BASELINE) == 2048 * MIB
    bigger = BASELINE.replace(shuffle_buffer=4096, batch_size=64, prefetch=4)
    # Shuffle: 3,072 more elements of 1 MiB; prefetch: 4 batches of 64 MiB instead of 2 of 32.
    assert predicted_rss_bytes(baseline, BASELINE, bigger) == (2048 + 3072 + 256 - 64) * MIB
    # AUTOTUNE is tf.data's to size: the buffer keeps its measured size.
    tuned = BASELINE.replace(prefetch=AUTOTUNE)
    assert predicted_rss_bytes(baseline, BASELINE, tuned) == 2048 * MIB


def test_a_configuration_over_the_budget_is_refused_with_its_figures():
    baseline = _baseline()
    bigger = BASELINE.replace(shuffle_buffer=8192)
    problem = ram_problem(baseline, BASELINE, bigger, budget_bytes=4096 * MIB)
    assert problem is not None
    assert problem.startswith("its buffers would take the peak host RAM to about 9 GiB")
    assert "over the 4 GiB budget (--ram-budget)" in problem
    assert ram_problem(baseline, BASELINE, BASELINE, budget_bytes=4096 * MIB) is None
    assert ram_problem(None, BASELINE, bigger, budget_bytes=4096 * MIB) is None


def test_a_call_site_sizes_the_buffer_its_value_matches():
    baseline = _baseline()
    site = "shuffle@train.py:12.buffer_size"
    before = Knobs(batch_size=32, sites={site: 1024})
    after = Knobs(batch_size=32, sites={site: 2048})
    assert predicted_rss_bytes(baseline, before, after) == (2048 + 1024) * MIB


def _loader_baseline(workers: int = 2):
    # Trainer 1 GiB at the peak; each worker 64 MiB then, 512 MiB at the end of a pass.
    memory = WorkerMemory(workers, 2 * 64 * MIB, 2 * 512 * MIB, batches=99, pass_batches=100,
                          complete=True)  # fmt: skip
    loader = LoaderReport(workers, False, host_ram_peak_bytes=(1024 + 128) * MIB,
                          workers_ram_peak_bytes=128 * MIB, worker_memory=memory)  # fmt: skip
    return dataclasses.replace(fake_profile(), loader=loader)


def test_dataloader_workers_are_priced_at_the_end_of_a_pass_not_its_start():
    baseline, before = _loader_baseline(), Knobs(batch_size=32)
    assert predicted_rss_bytes(baseline, before, before) == (1024 + 2 * 512) * MIB
    more = before.replace(num_workers=8)
    assert predicted_rss_bytes(baseline, before, more) == (1024 + 8 * 512) * MIB
    site = Knobs(batch_size=32, sites={"DataLoader@train.py:9.num_workers": 4})
    assert predicted_rss_bytes(baseline, before, site) == (1024 + 4 * 512) * MIB
    problem = ram_problem(baseline, before, more, budget_bytes=4096 * MIB)
    assert problem is not None and problem.startswith("8 workers would take the peak host RAM")
    assert "each worker at the 512 MiB of private memory a baseline worker held at the end" in (
        problem
    )
    # By the workers' peak during the profile's window (64 MiB each) it would have fitted.
    assert (1024 + 8 * 64) * MIB < 4096 * MIB
