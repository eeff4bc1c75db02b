"""The zero-change row of `make bench`: a benchmark pipeline as plain code, tuned and handed over.

The plain-file twin of a suite pipeline (`benchmarks/zero_change/`: the same data and costs,
its values written in its tf.data calls) is tuned with the command a user runs, `tfperf tune
--write-patch` (verified hand-over on), in a child process. The patch it writes is applied
with `patch -p0` to a copy of the twin's folder (the patched file copied, every other file a
link, so the data is found where it lies), kept in the run's studies folder. Then the original
and the patched file are measured side by side, interleaved, each run a fresh `run_trial`
child, as `benchmarks/measure.py` measures the other configurations: both as written, with
nothing of tfperf's passed in. So the row shows what a user who applies the patch gets.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.record import Failure
from benchmarks.suite import BENCHMARKS_DIR, Settings, Spec
from benchmarks.zero_change_record import RatioFigure, ZeroChange
from tfperf.errors import TfperfError
from tfperf.knobs import Knobs
from tfperf.results import TrialOutcome, TrialStatus
from tfperf.results.tune import TuneResult
from tfperf.trials import Budgets, TrialRequest, run_trial
from tfperf.tuner import Finalist
from tfperf.tuner._remeasure import Repeats, remeasure

if TYPE_CHECKING:
    from benchmarks.measure import Log

#: Suite pipeline -> its plain-file twin.
TWINS = {"remote_storage": BENCHMARKS_DIR / "zero_change" / "remote_storage_plain.py"}
#: How long the `tfperf tune` child may run (a full study of the twin takes about 8 minutes).
TUNE_TIMEOUT_S = 3600.0


def run_zero_change(
    specs: Sequence[Spec], settings: Settings, studies: Path, log: Log, failures: list[Failure]
) -> ZeroChange | None:
    """The row for the first of `specs` that has a twin; None in a smoke run, without one, or
    when it fails (then added to `failures`, and the run goes on)."""
    from benchmarks.measure import BenchError

    contract = next((spec for spec in specs if spec.name in TWINS), None)
    if contract is None or settings.smoke:
        return None
    try:
        return measure_zero_change(contract, settings, studies, log)
    except (BenchError, TfperfError, subprocess.TimeoutExpired) as error:
        log(f"{contract.name} (zero-change): FAILED, going on: {error}")
        failures.append(Failure(f"{contract.name} (zero-change)", str(error)))
        return None


def measure_zero_change(contract: Spec, settings: Settings, studies: Path, log: Log) -> ZeroChange:
    """Tunes the twin of `contract` with `tfperf tune --write-patch`, applies the patch to a
    copy in `studies`, and measures original and patched side by side."""
    twin = TWINS[contract.name]
    steps = settings.steps_for(contract)
    log(f"{twin.name}: tfperf tune --write-patch, {settings.trials} trials of {steps} steps")
    result, patch_file = _tune(twin, contract, settings, studies)
    handover = result.handover
    claimed = result.speedup_vs_baseline
    record = ZeroChange(
        contract=contract.name,
        pipeline=twin.name,
        trials=settings.trials,
        steps=steps,
        best_label=result.best.label,
        claimed=RatioFigure(claimed.ratio, claimed.spread),
        verified=None,
        verify_problem=handover.verify_problem if handover else "no hand-over",
        diff=handover.diff if handover else "",
        manual_edits=list(handover.manual_edits) if handover else [],
        original=[],
        patched=[],
    )
    if handover is not None and handover.verified is not None:
        record.verified = RatioFigure(handover.verified.ratio, handover.verified.spread)
    if not record.diff:
        record.problem = f"tfperf wrote no patch: {record.verify_problem or 'no gain'}"
        return record
    patched = _patched_copy(twin, patch_file, studies / "zero_change_patched")
    log(f"{twin.name}: original vs patched, {settings.repeats} interleaved repeats")
    budgets = Budgets(ram_bytes=result.ram_budget_bytes, timeout_s=contract.trial_timeout_s)
    runs = _side_by_side({"original": twin, "patched": patched}, steps, settings, budgets, log)
    record.original, record.patched = _rates(runs["original"]), _rates(runs["patched"])
    record.failures = [
        f"{label}: {outcome.status.value}: {outcome.reason}"
        for label, outcomes in runs.items()
        for outcome in outcomes
        if outcome.status is not TrialStatus.COMPLETE
    ]
    return record


def tune_command(twin: Path, contract: Spec, settings: Settings, studies: Path) -> list[str]:
    """The `tfperf tune` command line the row runs, as a user would."""
    command = [sys.executable, "-m", "tfperf", "tune", str(twin), "--quiet"]
    command += ["--trials", str(settings.trials), "--steps", str(settings.steps_for(contract))]
    command += ["--finalists", str(settings.finalists), "--rounds", str(settings.rounds)]
    command += ["--trial-timeout", str(contract.trial_timeout_s)]
    if settings.warmup is not None:
        command += ["--warmup", str(settings.warmup)]
    if settings.seed is not None:
        command += ["--seed", str(settings.seed)]
    if contract.ram_budget_bytes is not None:
        command += ["--ram-budget", str(contract.ram_budget_bytes)]
    command += ["--storage", f"sqlite:///{studies / 'zero_change.db'}", "--study", twin.stem]
    command += ["--json", str(studies / "zero_change-tune.json")]
    command += ["--html", str(studies / "zero_change.html")]
    return [*command, "--write-patch", str(studies / "zero_change.patch")]


def _tune(twin: Path, contract: Spec, settings: Settings, studies: Path) -> tuple[TuneResult, Path]:
    from benchmarks.measure import BenchError

    command = tune_command(twin, contract, settings, studies)
    done = subprocess.run(
        command,
        cwd=BENCHMARKS_DIR.parent,
        capture_output=True,
        text=True,
        check=False,
        timeout=TUNE_TIMEOUT_S,
    )
    tune_json = studies / "zero_change-tune.json"
    if done.returncode != 0 or not tune_json.exists():
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise BenchError(
            f"{twin.name}: `tfperf tune` failed (exit status {done.returncode}); run "
            f"`{' '.join(command[2:])}` to see why. Its output ended with:\n{tail}"
        )
    data = json.loads(tune_json.read_text(encoding="utf-8"))
    return TuneResult.from_dict(data), studies / "zero_change.patch"


def _patched_copy(twin: Path, patch_file: Path, into: Path) -> Path:
    """The twin's folder mirrored in `into` (links), with `patch -p0` applied there."""
    from benchmarks.measure import BenchError

    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    touched = _patched_files(patch_file.read_text(encoding="utf-8"))
    for entry in twin.parent.iterdir():
        if entry.name == "__pycache__":
            continue
        if entry.name in touched:
            shutil.copyfile(entry, into / entry.name)
        else:
            (into / entry.name).symlink_to(entry.resolve())
    done = subprocess.run(
        ["patch", "-p0", "--quiet", "--no-backup-if-mismatch", "-i", str(patch_file)],
        cwd=into,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise BenchError(
            f"the patch {patch_file} does not apply with `patch -p0` in a copy of "
            f"{twin.parent}: {(done.stderr or done.stdout).strip()}"
        )
    return into / twin.name


def _patched_files(diff: str) -> set[str]:
    """The files a unified diff of `--- ./FILE` headers changes, by name."""
    marker = "+++ ./"
    return {line[len(marker) :].strip() for line in diff.splitlines() if line.startswith(marker)}


def _side_by_side(
    paths: dict[str, Path], steps: int, settings: Settings, budgets: Budgets, log: Log
) -> dict[str, list[TrialOutcome]]:
    """Each file run as written `settings.repeats` times, interleaved, each in a fresh child."""
    finalists = [Finalist(label, None, Knobs()) for label in paths]
    requests = {
        id(finalist.knobs): TrialRequest(
            paths[finalist.label], finalist.knobs, steps=steps, warmup=settings.warmup
        )
        for finalist in finalists
    }
    runs: dict[str, list[TrialOutcome]] = {label: [] for label in paths}

    def measured(finalist: Finalist, outcome: TrialOutcome) -> None:
        runs[finalist.label].append(outcome)
        figure = (
            f"{outcome.result.end_to_end.examples_per_sec:,.0f} examples/s"
            if outcome.result is not None
            else outcome.status.value
        )
        log(f"  {finalist.label:<9} {figure}")

    remeasure(
        finalists,
        Repeats(settings.repeats, lambda knobs: requests[id(knobs)], budgets, run_trial, measured),
    )
    return runs


def _rates(outcomes: list[TrialOutcome]) -> list[float]:
    return [
        outcome.result.end_to_end.examples_per_sec
        for outcome in outcomes
        if outcome.status is TrialStatus.COMPLETE and outcome.result is not None
    ]
