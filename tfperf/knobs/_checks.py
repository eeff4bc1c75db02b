"""What to check when a recommendation turns a knob on: each knob's declared `check_note`.

Some knobs change speed alone in most pipelines and what training sees in a few: a DataLoader
that keeps its workers (`persistent_workers`) keeps their dataset copies and random state
across epochs. Such a knob declares the sentence (`Knob.check_note`); the tune summary, the
study's page and the patch all say it where they turn the knob on, by its name or at a call
site that passes it (`DataLoader@train.py:40.persistent_workers`).

Example:
    >>> from tfperf.knobs import Knobs
    >>> turned_on_checks(Knobs(), Knobs(persistent_workers=True))[0][:40]
    "persistent_workers keeps each worker's c"
"""

from __future__ import annotations

from typing import Any

from tfperf.knobs._declare import Applier, Knob
from tfperf.knobs._knobs import KNOBS, Knobs
from tfperf.knobs._sitename import SiteName, is_site_name


def turned_on_checks(before: Knobs, after: Knobs) -> list[str]:
    """The `check_note` of each knob `after` turns on (true there, not in `before`), by its
    name or at a call site; each once, in declaration order."""
    notes = []
    for declared in KNOBS:
        if declared.check_note is None:
            continue
        by_name = _turned_on(getattr(before, declared.name), getattr(after, declared.name))
        at_site = any(
            _site_argument(site, declared) and _turned_on(before.sites.get(site), value)
            for site, value in after.sites.items()
        )
        if by_name or at_site:
            notes.append(declared.check_note)
    return notes


def site_check(site: str, value: Any) -> str | None:
    """The `check_note` of the knob a call site passes, when `value` turns it on; else None."""
    if not value or not is_site_name(site):
        return None
    for declared in KNOBS:
        if declared.check_note is not None and _site_argument(site, declared):
            return declared.check_note
    return None


def _turned_on(before: Any, after: Any) -> bool:
    return bool(after) and not bool(before)


def _site_argument(site: str, declared: Knob) -> bool:
    """Whether call site `site` passes `declared`'s DataLoader argument."""
    if declared.applied_by is not Applier.DATALOADER or not is_site_name(site):
        return False
    return SiteName.parse(site).argument == declared.option
