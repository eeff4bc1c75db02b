"""The verified hand-over of a zero-change study: the patch, applied and measured.

At the end of `tfperf tune --write-patch` on a plain file or a script, the recommended
configuration becomes one patch (`tfperf.sites.patch_for`: the values rewritten and the code
tfperf applied itself inserted). The patch is then applied to a temporary copy of the user's
folder (the patched files written, everything else linked) and the patched code is measured
against the original, interleaved, each run in a fresh process, by the same re-measurement the
finalists get (`tfperf.tuner._remeasure.remeasure`). Both run as written: no value of tfperf's
is passed to either, so the ratio is what the user gets by applying the patch.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from pathlib import Path

from tfperf.pipeline import PipelineKind
from tfperf.results import TrialOutcome
from tfperf.results.tune import HandOver, Measurement, Speedup, TuneResult, keeps_baseline, speedup
from tfperf.sites import Patch, patch_for
from tfperf.study import feasible_complete
from tfperf.study.records import TrialRecord
from tfperf.tuner._edit_gains import edit_gains
from tfperf.tuner._remeasure import Finalist, Repeats, remeasure
from tfperf.tuner._tuner import Tuner

ORIGINAL, PATCHED = "original", "patched"


def hand_over(tuner: Tuner, result: TuneResult, *, verify: bool = True) -> HandOver | None:
    """The patch of `result.best` for a plain file or script, verified unless `verify` is
    False; None for a file that reads its knobs (its BASELINE is the answer).

    Verification costs up to `2 * rounds` runs of the end-to-end phase alone (the figure the
    ratio reads), each in a fresh process.
    """
    pipeline = tuner.pipeline
    if pipeline.discovery is None:
        return None
    root = pipeline.path.parent.resolve()
    if keeps_baseline(result.best, result.speedup_vs_baseline):
        return HandOver(
            str(root),
            "",
            [],
            None,
            "no patch: no configuration beat your code beyond noise",
            edit_gains(pipeline.discovery, None, _trial_sites(tuner)),
        )
    patch = patch_for(
        root,
        pipeline.discovery,
        result.baseline.knobs.to_dict(),
        result.best.knobs.to_dict(),
        script=pipeline.kind is PipelineKind.SCRIPT,
    )
    handover = HandOver(str(root), patch.diff, patch.manual_sentences())
    handover.edits = edit_gains(pipeline.discovery, patch, _trial_sites(tuner))
    if not verify:
        handover.verify_problem = "not verified (--no-verify, or no --write-patch)"
    elif not patch.diff:
        handover.verify_problem = "not verified: the patch is empty (every edit is by hand)"
    else:
        handover.verified, handover.verify_problem = _verify(tuner, patch)
    return handover


def patched_copy(root: Path, patch: Patch, into: Path) -> None:
    """`root` mirrored in `into`: each patched file written, every other entry a link."""
    patched = {Path(file): content for file, content in patch.files}
    folders = {parent for file in patched for parent in file.parents if parent != Path(".")}
    _mirror(root, into, Path("."), patched, folders)


def _mirror(
    root: Path, into: Path, here: Path, patched: dict[Path, bytes], folders: set[Path]
) -> None:
    (into / here).mkdir(parents=True, exist_ok=True)
    for entry in (root / here).iterdir():
        relative = here / entry.name
        if relative in patched:
            (into / relative).write_bytes(patched[relative])
        elif relative in folders:
            _mirror(root, into, relative, patched, folders)
        elif entry.name != "__pycache__":
            os.symlink(entry.resolve(), into / relative)


def _verify(tuner: Tuner, patch: Patch) -> tuple[Speedup | None, str | None]:
    pipeline = tuner.pipeline
    root = pipeline.path.parent.resolve()
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="tfperf-handover-") as folder:
        main = pipeline.path.resolve().relative_to(root).as_posix()
        files = dict(patch.files)
        files.setdefault(main, pipeline.path.read_bytes())  # a link would lead back to root
        patched_copy(root, dataclasses.replace(patch, files=tuple(files.items())), Path(folder))
        original = pipeline.baseline  # the sites at their written values
        patched = pipeline.baseline.replace(sites={})  # the patched code, nothing overridden
        requests = {
            id(original): tuner.verifying_request(original),
            id(patched): tuner.verifying_request(patched, path=Path(folder) / pipeline.path.name),
        }

        def on_measured(finalist: Finalist, outcome: TrialOutcome) -> None:
            if outcome.result is None:
                failures.append(f"{finalist.label}: {outcome.status.value}: {outcome.reason}")

        repeats = Repeats(
            tuner.options.rounds,
            lambda knobs: requests[id(knobs)],
            tuner.budgets,
            lambda request, budgets: tuner.runner(request, budgets),
            on_measured,
        )
        measured = remeasure(
            [Finalist(ORIGINAL, None, original), Finalist(PATCHED, None, patched)], repeats
        )
    by_label: dict[str, Measurement] = {m.label: m for m in measured}
    if ORIGINAL not in by_label or PATCHED not in by_label:
        reasons = "; ".join(failures[:2]) or "no run completed"
        return None, f"not verified: the side-by-side runs failed ({reasons})"
    return speedup(by_label[PATCHED], by_label[ORIGINAL]), None


def _trial_sites(tuner: Tuner) -> list[tuple[dict[str, int | None], float]]:
    """(site values, examples/s) of each finished trial of the study, for `edit_gains`."""
    ledger = getattr(tuner, "ledger", None)  # None: a record built by hand, no study behind
    if ledger is None:
        return []
    found = []
    for trial in feasible_complete(ledger.study):
        knobs = TrialRecord.from_trial(trial).knobs
        if knobs is not None and trial.values:
            found.append((dict(knobs.sites), float(trial.values[0])))
    return found
