"""What to check when a recommendation turns a knob on: declared once, said wherever the
recommendation or the patch turns it on."""

from __future__ import annotations

import dataclasses

from tests.report.helpers import measured, tune_result
from tests.sites.test_patch import site
from tfperf.knobs import KNOBS, Knobs
from tfperf.knobs.declare import site_check, turned_on_checks
from tfperf.report import render_tune_summary
from tfperf.results.discovery import ArgumentForm
from tfperf.results.tune import Speedup
from tfperf.sites._patch import Change, Patch

KEPT = KNOBS["persistent_workers"].check_note
SITE = "DataLoader@train.py:40.persistent_workers"


def test_persistent_workers_declares_what_to_check() -> None:
    assert KEPT is not None and KEPT.startswith("persistent_workers keeps each worker's copy")
    assert "set_epoch" in KEPT and "global RNG" in KEPT
    # Not a change to training: the recommendation is not set aside for it.
    assert not KNOBS["persistent_workers"].changes_training


def test_the_check_is_said_when_turned_on_by_name_or_at_a_call_site() -> None:
    assert turned_on_checks(Knobs(), Knobs(persistent_workers=True)) == [KEPT]
    assert turned_on_checks(Knobs(), Knobs(sites={SITE: 1})) == [KEPT]
    assert turned_on_checks(Knobs(persistent_workers=True), Knobs(persistent_workers=True)) == []
    assert turned_on_checks(Knobs(), Knobs(persistent_workers=False, num_workers=4)) == []
    assert site_check(SITE, 1) == KEPT
    assert site_check(SITE, 0) is None
    assert site_check("DataLoader@train.py:40.num_workers", 4) is None


def test_the_tune_summary_says_it_under_the_recommendation() -> None:
    best = measured("trial 3", [3000.0, 3010.0], persistent_workers=True, num_workers=2)
    baseline = measured("baseline", [1000.0, 1010.0], num_workers=2)
    faster = dataclasses.replace(
        tune_result(), best=best, baseline=baseline, speedup_vs_baseline=Speedup(3.0, 0.01, True)
    )
    assert f"Check: {KEPT}" in render_tune_summary(faster)
    # What the recommendation's trial found it changes in the data training sees follows.
    shards = "Each of the 2 workers ends a pass short. Fewer workers make fewer."
    told = render_tune_summary(dataclasses.replace(faster, hazards=[shards]))
    assert f"Check: {KEPT}\nCheck: {shards}" in told
    # Keeping the baseline turns nothing on.
    kept = dataclasses.replace(faster, best=baseline, speedup_vs_baseline=Speedup(1, 0, False))
    assert "Check:" not in render_tune_summary(kept)


def test_the_patch_says_it_under_the_change() -> None:
    change = Change(site(SITE, ArgumentForm.ABSENT, None), 1)
    lines = Patch(diff="", written=(change,), manual=()).describe()
    assert lines[1] == f"    check: {KEPT}"
    other = Change(site("DataLoader@train.py:40.num_workers", ArgumentForm.KEYWORD, 0), 4)
    assert Patch(diff="", written=(other,), manual=()).describe() == [f"  {other.describe()}"]
