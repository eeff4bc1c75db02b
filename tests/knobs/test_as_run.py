"""Knobs as a DataLoader runs them: what acts only with workers, without any."""

from __future__ import annotations

from tfperf.knobs import Knobs, SiteValues
from tfperf.knobs.declare import as_run

CALL = "DataLoader@train.py:12"


def sites(**values: int | None) -> SiteValues:
    return SiteValues({f"{CALL}.{argument}": value for argument, value in values.items()})


def test_by_name_worker_only_knobs_are_unset_without_workers():
    ran = as_run(Knobs(num_workers=0, prefetch_factor=4, persistent_workers=True), Knobs())
    assert (ran.prefetch_factor, ran.persistent_workers, ran.num_workers) == (None, None, 0)
    assert as_run(Knobs(num_workers=2, prefetch_factor=4), Knobs()).prefetch_factor == 4
    # As written (None): what make_loader passes is not known here, so nothing changes.
    assert as_run(Knobs(prefetch_factor=4), Knobs()).prefetch_factor == 4


def test_at_a_call_site_they_go_back_to_the_written_value_where_that_call_has_none():
    written = Knobs(sites=sites(num_workers=0, prefetch_factor=None, persistent_workers=0))
    chosen = Knobs(sites=sites(num_workers=0, prefetch_factor=4, persistent_workers=1))
    assert as_run(chosen, written).sites == written.sites
    # The call's workers as written, when the chosen values leave them out.
    no_gate = Knobs(sites=sites(prefetch_factor=4))
    assert as_run(no_gate, written).sites == sites(prefetch_factor=None)
    with_workers = Knobs(sites=sites(num_workers=2, prefetch_factor=4, persistent_workers=1))
    assert as_run(with_workers, written) == with_workers


def test_other_calls_and_other_arguments_are_left_alone():
    other = "DataLoader@train.py:30"
    chosen = Knobs(
        sites=SiteValues(
            {
                f"{CALL}.num_workers": 0,
                f"{CALL}.batch_size": 64,
                f"{other}.num_workers": 4,
                f"{other}.prefetch_factor": 8,
                "map@train.py:5.num_parallel_calls": 2,
            }
        )
    )
    assert as_run(chosen, Knobs()) == chosen
