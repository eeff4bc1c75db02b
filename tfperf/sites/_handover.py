"""The whole patch of a zero-change study: rewritten values, and the code tfperf applied itself.

A trial of a plain file or script measures the values written at its call sites (overridden),
and what tfperf sets around the code: `tf.data.Options`, the Keras precision policy, a
`prefetch` added at the end. `patch_for` turns a measured configuration into one patch holding
all of it; `unplaceable` names, before a study, the knobs no patch could hold in these files,
so that the study fixes them at what the code does.

No TensorFlow here.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tfperf.knobs import KNOBS, SiteKind
from tfperf.knobs.declare import Applier
from tfperf.results.discovery import CallSite, Discovery
from tfperf.sites._edit_text import structure_edits
from tfperf.sites._insert import Additions, Anchor, placement_problem
from tfperf.sites._patch import Change, Patch, changes_between, inserted_prefetch, make_patch

#: The kind of insertion that writes what each applier put into effect around the code.
_INSERTIONS = {
    Applier.TF_DATA: "options",
    Applier.PRECISION: "precision",
    Applier.SERVICE: "service",
}


def applied_knobs() -> dict[str, str]:
    """Knobs tfperf applies itself, and the kind of insertion that writes each."""
    return {knob.name: _INSERTIONS[knob.applied_by] for knob in KNOBS.applied_by(*_INSERTIONS)}


def additions_between(
    before: Mapping[str, Any], after: Mapping[str, Any], prefetch: int | None
) -> Additions:
    """What tfperf applied for `after` (knobs as `Knobs.to_dict` writes them) that `before`
    (the code as written) does not do."""
    options = tuple(
        (knob.option or "", repr(after[knob.name]))
        for knob in KNOBS.applied_by(Applier.TF_DATA)
        if after.get(knob.name) is not None and after.get(knob.name) != before.get(knob.name)
    )
    name = KNOBS.mixed_precision.name
    precision = after.get(name)
    changed = precision is not None and precision != before.get(name)
    return Additions(
        options, str(precision) if changed else None, prefetch, _distribute_arguments(after)
    )


#: `distribute()`'s argument for each service knob, and tf.data's default for it.
_DISTRIBUTE = {
    "service_processing_mode": ("processing_mode", "parallel_epochs"),
    "service": ("service", None),
    "service_job_name": ("job_name", None),
    "service_compression": ("compression", "auto"),
    "service_max_outstanding_requests": ("max_outstanding_requests", None),
    "service_target_workers": ("target_workers", "auto"),
}


def _distribute_arguments(after: Mapping[str, Any]) -> str | None:
    """The arguments of the `distribute()` call `after` read its input through, as source;
    None when it read none. Arguments at tf.data's defaults are left out."""
    if after.get(KNOBS.service.name) is None:
        return None
    shown = []
    for name, (argument, default) in _DISTRIBUTE.items():
        value = after.get(name)
        if name == "service_processing_mode" and value is None:
            value = default  # required: tfperf's choice when unset
        elif value is None or value == default:
            continue
        if name == "service_compression" and value == "none":
            shown.append("compression=None")
            continue
        text = str(value).upper() if name == "service_target_workers" else value
        shown.append(f"{argument}={text!r}")
    return ", ".join(shown)


def patch_for(
    root: Path,
    discovery: Discovery,
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    *,
    script: bool,
) -> Patch:
    """The patch of the files under `root` that runs `after` as it was measured."""
    chosen = dict(after.get("sites") or {})
    changes = _without_conflicts(changes_between(discovery.sites, chosen))
    additions = additions_between(before, after, inserted_prefetch(discovery.sites, chosen))
    anchor = Anchor.parse(discovery.end, script) if discovery.end else None
    return make_patch(root, changes, anchor, additions)


def unplaceable(root: Path, discovery: Discovery, *, script: bool) -> dict[str, str]:
    """Knob (or site) name -> why no patch can write it into these files."""
    # Not the service's knobs: they act only under --service, which the user chose for the
    # cluster; a patch that cannot place `distribute()` says what to add by hand instead.
    names = {name: what for name, what in applied_knobs().items() if what != "service"}
    names.update(
        {site.name: "prefetch" for site in discovery.sites if site.calls == 0 and site.col is None}
    )
    if discovery.end is None:
        where = "the `fit` call" if script else "`make_dataset()`"
        reason = f"tfperf found no line of yours where the dataset reaches {where}"
        return dict.fromkeys(names, reason)
    anchor = Anchor.parse(discovery.end, script)
    try:
        source = (root / anchor.file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        return dict.fromkeys(names, f"tfperf cannot read {anchor.file} ({error})")
    problems = {what: placement_problem(source, anchor, what) for what in set(names.values())}
    if discovery.fit_gets_arrays:
        arrays = (
            f"`fit` at {discovery.end} gets arrays, not a tf.data.Dataset: Keras builds the "
            "dataset, and no line of yours holds it to add options or a prefetch to"
        )
        problems.update(options=arrays, prefetch=arrays)
    found = {name: problem for name, what in names.items() if (problem := problems[what])}
    return {**found, **_unplaceable_edits(root, discovery)}


def edit_sites(discovery: Discovery) -> list[CallSite]:
    """The structure edits tfperf may make in this pipeline (the recorder's `_edits`)."""
    return [site for site in discovery.sites if site.kind is SiteKind.EDIT]


def reorder_sites(discovery: Discovery) -> list[str]:
    """The names of the maps tfperf may move after their batch: searched only with
    `--reorder`, since a function run on whole batches may compute something else."""
    return [
        site.name
        for site in edit_sites(discovery)
        if (site.method, site.argument) == ("map", "after_batch")
    ]


def _unplaceable_edits(root: Path, discovery: Discovery) -> dict[str, str]:
    """Edit site -> why the patch could not write it in the file as it is now."""
    problems: dict[str, str] = {}
    for site in edit_sites(discovery):
        try:
            data = (root / site.file).read_bytes()
            made = structure_edits(data, ast.parse(data.decode("utf-8")), site)
        except (OSError, UnicodeDecodeError, SyntaxError) as error:
            made = f"tfperf cannot read {site.file} ({type(error).__name__}: {error})"
        if isinstance(made, str):
            problems[site.name] = made
    return problems


def _without_conflicts(changes: Sequence[Change]) -> list[Change]:
    """`changes` less a swap at a map that is also cached: a trial applies the cache and
    leaves the shuffle or batch reading it where it is (the recorder's `_edits`), so does
    the patch."""
    cached = {
        (c.site.file, c.site.end_line, c.site.end_col)
        for c in changes
        if (c.site.method, c.site.argument) == ("cache", "added")
    }
    return [
        change
        for change in changes
        if change.site.kind is not SiteKind.EDIT
        or change.site.method == "cache"
        or (change.site.file, change.site.end_line, change.site.end_col) not in cached
    ]
