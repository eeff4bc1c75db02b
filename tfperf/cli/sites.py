"""The call-site side of `tfperf tune`: find the sites before a search, write the patch after.

For a plain file or a script, the values tfperf tunes are written in the user's tf.data calls.
Before the search they are found (in a child process) and listed; after it, the recommended
values become a unified diff of the user's files, printed and, with `--write-patch`, saved.
"""

from __future__ import annotations

import dataclasses
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from tfperf import frameworks
from tfperf.knobs import Fixed
from tfperf.pipeline import PipelineFile, PipelineKind
from tfperf.results.discovery import describe_discovery
from tfperf.results.tune import HandOver, TuneResult, keeps_baseline
from tfperf.sites import Patch, patch_for, unplaceable

if TYPE_CHECKING:
    from tfperf.tuner import Tuner


def find_sites(pipeline: PipelineFile, *, quiet: bool) -> PipelineFile:
    """`pipeline` with its call sites found and listed on stderr; a knobs file as it is.

    The knobs tfperf applies itself (tf.data options, precision, a prefetch it adds) that no
    patch could write into these files are fixed at what the code does, and listed.
    """
    if pipeline.kind is PipelineKind.KNOBS:
        return pipeline
    from tfperf.trials import with_sites

    if not quiet:
        print(finding_sites(pipeline), file=sys.stderr, flush=True)
    found = with_sites(pipeline, stages=True)
    assert found.discovery is not None
    print("\n".join(describe_discovery(found.discovery)), file=sys.stderr)
    return fix_unplaceable(found)


def finding_sites(pipeline: PipelineFile) -> str:
    """What the search for call sites runs, in the words of the file's framework."""
    framework = frameworks.get(pipeline.framework)
    if pipeline.kind is PipelineKind.SCRIPT:
        what = f"script up to {framework.words.script_stop}"
    else:
        what = f"{framework.input_function}()"
    stages = ", then measures each stage alone" if framework.stage_graph else ""
    return (
        f"Finding the {framework.words.label} call sites of {pipeline.path.name} (runs its "
        f"{what}{stages})..."
    )


def fix_unplaceable(pipeline: PipelineFile) -> PipelineFile:
    """`pipeline` with each knob no patch could write fixed at its baseline value (said on
    stderr), so that the study measures only what the patch can hand over."""
    assert pipeline.discovery is not None
    script = pipeline.kind is PipelineKind.SCRIPT
    # A framework whose call sites say themselves which knobs no patch can hold (PyTorch's
    # `TorchSites.unplaceable`) answers for its own files; tf.data's rules answer otherwise.
    own = getattr(frameworks.get(pipeline.framework).sites(), "unplaceable", None)
    if own is not None:
        problems = own(pipeline.path.parent, pipeline.discovery)
    else:
        problems = unplaceable(pipeline.path.parent, pipeline.discovery, script=script)
    if not problems:
        return pipeline
    baseline = pipeline.baseline
    space = dict(pipeline.search_space)
    for name in problems:
        space[name] = Fixed(baseline.value_of(name))
    print(
        "Fixed at what your code does, since no patch could write them into your files:\n"
        + "\n".join(fixed_lines(problems, baseline.sites)),
        file=sys.stderr,
    )
    return dataclasses.replace(pipeline, search_space=space)


def fixed_lines(problems: Mapping[str, str], sites: Mapping[str, object]) -> list[str]:
    """One line per reason, naming the knobs it fixes. A call site shows the value read from
    the code; a framework knob shows none, as its baseline value is tfperf's default where the
    code does not set it (a script's DataLoader takes its values at its call, not from the
    `batch_size` knob), and the header already says it stays as the code has it."""
    by_reason: dict[str, list[str]] = {}
    for name, reason in sorted(problems.items()):
        value = sites.get(name)
        shown = f"{name} = {getattr(value, 'value', value)}" if "@" in name else name
        by_reason.setdefault(reason, []).append(shown)
    return [f"  {', '.join(names)}: {reason}" for reason, names in by_reason.items()]


def attach_handover(tuner: Tuner, result: TuneResult, *, verify: bool) -> None:
    """Sets `result.handover` for a plain file or script: the whole patch, verified (the
    patched files against the original, side by side) when `verify`."""
    from tfperf.tuner import hand_over

    if (
        verify
        and tuner.pipeline.discovery is not None
        and not keeps_baseline(result.best, result.speedup_vs_baseline)
    ):
        runs = 2 * tuner.options.rounds
        print(
            f"Verifying the patch: your code and the patched copy, {runs} runs side by side...",
            file=sys.stderr,
        )
    result.handover = hand_over(tuner, result, verify=verify)


def patch_section(pipeline: PipelineFile, result: TuneResult, write_to: Path | None) -> str:
    """What to change in the user's code for the recommendation, as text; "" for a knobs file.

    With `write_to`, the diff is also saved there (when there is one). The patch is
    `result.handover`'s when the tuner made one, else it is made here (unverified).
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
    if keeps_baseline(result.best, result.speedup_vs_baseline):
        lines.append(
            "Patch: none. No configuration beat your code by more than the measured noise."
        )
        return "\n".join(lines)
    chosen = dict(result.best.knobs.sites)
    script = pipeline.kind is PipelineKind.SCRIPT
    patch = patch_for(
        pipeline.path.parent,
        pipeline.discovery,
        result.baseline.knobs.to_dict(),
        result.best.knobs.to_dict(),
        script=script,
    )
    lines += [f"Patch for your code ({result.best.label}):", *patch.describe()]
    # Sites that change training are warned about in the summary printed above this section
    # (`result.changes_training`, the one rule of `tfperf.results.training_changes`).
    lines += _stale(chosen, pipeline)
    if patch.diff:
        lines += ["", patch.diff.rstrip("\n"), ""]
        lines.append(_apply_hint(patch, pipeline, write_to))
    if result.handover is not None:
        lines.append(describe_handover(result.handover, result))
        if result.handover.edits:  # issue 15: the structure edits and what each was worth
            lines += ["Structure edits:", *(f"  {e.describe()}" for e in result.handover.edits)]
    return "\n".join(lines)


def describe_handover(handover: HandOver, result: TuneResult) -> str:
    """One sentence: what the patched files measured against the original, or why nothing."""
    verified = handover.verified
    if verified is None:
        return f"Verification: {handover.verify_problem or 'not run'}."
    text = (
        f"Verified: the patched files run at {verified.ratio:.2f}x the original "
        + (
            f"(± {verified.ratio * verified.spread:.2f})"
            if verified.spread_known
            else "(spread unknown: a single run each)"
        )
        + ", side by side in fresh processes."
    )
    claimed = result.speedup_vs_baseline
    gap = verified.spread + claimed.spread
    if claimed.significant and verified.ratio < claimed.ratio * (1 - gap):
        text += (
            f" That does not reproduce the winner's {claimed.ratio:.2f}x within noise: the "
            "patch does not hold all of what was measured (see the edits by hand above)."
        )
    elif verified.ratio > claimed.ratio * (1 + gap):
        # Two figures for one answer: say why, and which one the recommendation rests on.
        text += (
            f" That is above the winner's {claimed.ratio:.2f}x beyond noise: the two are "
            "separate measurements (here the original ran beside the patched files in fresh "
            "processes, in the study the baseline beside the finalists), so the machine's "
            f"load differed between them; the recommendation rests on the study's "
            f"{claimed.ratio:.2f}x."
        )
    return text


def _apply_hint(patch: Patch, pipeline: PipelineFile, write_to: Path | None) -> str:
    folder = pipeline.path.parent
    if write_to is None:
        return f"Save it with --write-patch, then apply it from {folder}: `patch -p0 < FILE`."
    from tfperf.errors import OutputPathError
    from tfperf.outputs import write_text

    try:
        write_to = write_text(write_to, patch.diff, "--write-patch")
    except OutputPathError as error:
        return f"The patch was not saved: {error} Copy the diff above instead."
    # Quoted for the shell: a folder or file name with a space (or a quote) must still paste
    # as one command.
    shown = shlex.quote(str(write_to.resolve()))
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
