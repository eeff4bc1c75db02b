"""Knobs as a DataLoader runs them: what acts only with workers is as written without any.

A DataLoader left with no worker processes drops every argument that acts only with workers
(`Knob.needs_workers`: torch refuses them then), so a configuration that sets one beside
`num_workers=0` runs exactly as the one that leaves it as written. `as_run` writes it so, by
name for `make_loader`'s knobs and at each call site for a script's loaders: a trial then
records what it ran, a search sees the two as one configuration, and no patch writes an
argument torch refuses.

Example:
    >>> from tfperf.knobs import Knobs
    >>> as_run(Knobs(num_workers=0, prefetch_factor=4), Knobs()).prefetch_factor is None
    True
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tfperf.knobs._knobs import KNOBS, Knobs
from tfperf.knobs._sitename import SiteName, SiteValues, is_site_name

#: The knob whose count the worker-only knobs need.
WORKERS = KNOBS["num_workers"]


def as_run(knobs: Knobs, written: Knobs) -> Knobs:
    """`knobs` with each worker-only knob as `written` has it (unset, for a knob by name)
    where its loader has no workers: `knobs.num_workers` is 0, or, at a call site, that call's
    `num_workers` as `knobs` sets it (else as written) is 0 or left out."""
    gated = {knob.call: knob for knob in KNOBS if knob.needs_workers}
    changes: dict[str, Any] = {}
    if getattr(knobs, WORKERS.name) == 0:
        changes = {knob.name: None for knob in gated.values() if getattr(knobs, knob.name)}
    sites = dict(knobs.sites)
    for name in knobs.sites:
        site = SiteName.parse(name) if is_site_name(name) else None
        if site is None or (site.method, site.argument) not in gated:
            continue
        gate = str(dataclasses.replace(site, argument=WORKERS.option or WORKERS.name))
        if gate in knobs.sites or gate in written.sites:
            workers = knobs.sites.get(gate, written.sites.get(gate))
            if not workers and sites[name] != written.sites.get(name):
                sites[name] = written.sites.get(name)
    if sites != dict(knobs.sites):
        changes["sites"] = SiteValues(sites)
    return dataclasses.replace(knobs, **changes) if changes else knobs
