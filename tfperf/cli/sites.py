"""The call-site side of `tfperf tune`: find the sites before a search, write the patch after.

For a plain file or a script, the values tfperf tunes are written in the user's tf.data calls.
Before the search they are found (in a child process) and listed; after it, the recommended
values become a unified diff of the user's files, printed and, with `--write-patch`, saved.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tfperf.pipeline import PipelineFile, PipelineKind
from tfperf.results import TuneResult, describe_discovery
from tfperf.sites import Patch, changes_between, make_patch


def find_sites(pipeline: PipelineFile, *, quiet: bool) -> PipelineFile:
    """`pipeline` with its call sites found and listed on stderr; a knobs file as it is."""
    if pipeline.kind is PipelineKind.KNOBS:
        return pipeline
    from tfperf.trials import with_sites

    what = "script up to model.fit" if pipeline.kind is PipelineKind.SCRIPT else "make_dataset()"
    if not quiet:
        print(
            f"Finding the tf.data call sites of {pipeline.path.name} (runs its {what}, then "
            "measures each stage alone)...",
            file=sys.stderr,
            flush=True,
        )
    found = with_sites(pipeline, stages=True)
    assert found.discovery is not None
    print("\n".join(describe_discovery(found.discovery)), file=sys.stderr)
    return found


def patch_section(pipeline: PipelineFile, result: TuneResult, write_to: Path | None) -> str:
    """What to change in the user's code for the recommendation, as text; "" for a knobs file.

    With `write_to`, the diff is also saved there (when there is one).
    """
    if pipeline.discovery is None:
        return (
            f"No patch: {pipeline.path.name} reads its knobs, so the BASELINE above is what "
            "to change (--write-patch is for plain files and scripts)."
            if write_to is not None
            else ""
        )
    slowest = pipeline.discovery.slowest
    lines = [slowest.describe()] if slowest is not None else []
    if result.best.label == "baseline" or not result.speedup_vs_baseline.significant:
        lines.append(
            "Patch: none. No configuration beat your code by more than the measured noise."
        )
        return "\n".join(lines)
    chosen = dict(result.best.knobs.get("sites") or {})
    patch = make_patch(pipeline.path.parent, changes_between(pipeline.discovery.sites, chosen))
    lines += [f"Patch for your code ({result.best.label}):", *patch.describe()]
    # Sites that change training are warned about in the summary printed above this section
    # (`result.changes_training`, the one rule of `tfperf.results.training_changes`).
    lines += _applied(result) + _stale(chosen, pipeline)
    if patch.diff:
        lines += ["", patch.diff.rstrip("\n"), ""]
        lines.append(_apply_hint(patch, pipeline, write_to))
    return "\n".join(lines)


def _apply_hint(patch: Patch, pipeline: PipelineFile, write_to: Path | None) -> str:
    folder = pipeline.path.parent
    if write_to is None:
        return f"Save it with --write-patch, then apply it from {folder}: `patch -p0 < FILE`."
    write_to.parent.mkdir(parents=True, exist_ok=True)
    write_to.write_text(patch.diff, encoding="utf-8")
    shown = write_to.resolve()
    return (
        f"Patch written to {write_to}. Apply it from {folder}: `patch -p0 < {shown}` or "
        f"`git apply {shown}`."
    )


def _stale(chosen: dict[str, int | None], pipeline: PipelineFile) -> list[str]:
    assert pipeline.discovery is not None
    known = {site.name for site in pipeline.discovery.sites}
    stale = sorted(set(chosen) - known)
    if not stale:
        return []
    return [
        f"Not in the file any more (it changed since the study began): {', '.join(stale)}. "
        "Start a new study with --study to tune the file as it is now."
    ]


def _applied(result: TuneResult) -> list[str]:
    """Settings tfperf applied itself: no call in the file holds them, so they are code to add."""
    before, after = result.baseline.knobs, result.best.knobs
    lines = []
    if after.get("mixed_precision") != before.get("mixed_precision"):
        policy = after.get("mixed_precision")
        lines.append(f'  keras.mixed_precision.set_global_policy("{policy}")  # before the model')
    options = [
        f"options.{path} = {after.get(name)}"
        for name, path in _OPTIONS.items()
        if after.get(name) != before.get(name) and after.get(name) is not None
    ]
    if options:
        lines += ["  options = tf.data.Options()", *[f"  {line}" for line in options]]
        lines.append("  ds = ds.with_options(options)  # on the dataset given to fit")
    if not lines:
        return []
    return ["Add by hand (tfperf set these itself; no call in your file holds them):", *lines]


_OPTIONS = {
    "deterministic": "deterministic",
    "private_threadpool_size": "threading.private_threadpool_size",
}
