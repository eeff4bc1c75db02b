"""Measures the time to an answer: a tune's time split, read from its study, and one default
`tfperf profile` of the quickstart against `tfperf tune --trials 8` of it, side by side.

The split needs no clock of its own: every figure is one the study already stores (each
trial's Optuna start and end, its process wall time and its `ProfileResult`, the lock trial
of the final re-measurement and the re-measurement's windows). The side-by-side figure runs
the two commands a user runs, one after the other, each in a child; nothing here prints.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.answer_record import ProfileAgainstTune, TimeSplit
from benchmarks.suite import BENCHMARKS_DIR
from tfperf.results import ProfileResult, TrialStatus
from tfperf.study.records import TrialRecord, read_study

if TYPE_CHECKING:
    import optuna

REPO = BENCHMARKS_DIR.parent
#: The quickstart, as `make demo` profiles it.
QUICKSTART = Path("examples") / "quickstart" / "pipeline.py"
#: The trial budget of the issue's side-by-side figure.
QUICKSTART_TRIALS = 8
#: How long either command may run.
COMMAND_TIMEOUT_S = 3600.0


def time_split(storage: str, study_name: str, wall_s: float) -> TimeSplit:
    """Where a tune of `wall_s` seconds on the study `study_name` in `storage` spent them."""
    import optuna

    study = optuna.load_study(study_name=study_name, storage=storage)
    return split_of(study.get_trials(deepcopy=False), _remeasure_runs(study), wall_s)


def split_of(
    trials: Iterable[optuna.trial.FrozenTrial], remeasure_runs: int, wall_s: float
) -> TimeSplit:
    """The split of a study's stored `trials` (see `TimeSplit` for each figure)."""
    split = TimeSplit(wall_s, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, remeasure_runs)
    for trial in trials:
        record = TrialRecord.from_trial(trial)
        if record.status is TrialStatus.LOCK:
            split.remeasure_s += _span(trial)
        elif record.searched and record.wall_s is not None:
            _add_trial(split, record.wall_s, record.profile() if record.complete else None)
    return split


def _add_trial(split: TimeSplit, wall_s: float, result: ProfileResult | None) -> None:
    """Adds one trial's process to `split`: its parts when it completed, else all stopped."""
    if result is None:
        split.stopped += 1
        split.stopped_s += wall_s
        return
    phases = [p for p in (result.end_to_end, result.pipeline_only, result.compute_only) if p]
    warmup = sum(phase.warmup.duration_s for phase in phases)
    measured = sum(phase.duration_s for phase in phases)
    stages = result.stages.duration_s if result.stages is not None else 0.0
    split.completed += 1
    split.warmup_s += warmup
    split.phases_s += measured
    split.stages_s += stages
    split.startup_s += wall_s - warmup - measured - stages


def _span(trial: optuna.trial.FrozenTrial) -> float:
    if trial.datetime_start is None or trial.datetime_complete is None:
        return 0.0
    return (trial.datetime_complete - trial.datetime_start).total_seconds()


def _remeasure_runs(study: optuna.Study) -> int:
    """The processes of the stored re-measurement: every window, and every repeat stopped over
    a budget; 0 when none is stored."""
    measured = read_study(study).remeasured or []
    return sum(len(m.examples_per_sec) + len(m.confirmed) + m.over_budget for m in measured)


def profile_against_tune(log: Callable[[str], None]) -> ProfileAgainstTune:
    """One default `tfperf profile` of the quickstart, then `tfperf tune --trials 8` of it on a
    fresh study, each timed as a whole command in a child.

    Raises:
        RuntimeError: either command failed; the message carries the end of its output.
    """
    with tempfile.TemporaryDirectory(prefix="tfperf-answer-") as folder:
        out = Path(folder)
        log(f"time to an answer: tfperf profile {QUICKSTART}")
        profile_s = _timed(_tfperf("profile", "--json", out / "p.json", "--html", out / "p.html"))
        storage = f"sqlite:///{out / 'quickstart.db'}"
        log(f"time to an answer: tfperf tune {QUICKSTART} --trials {QUICKSTART_TRIALS}")
        tune = _tfperf(
            "tune",
            "--trials",
            str(QUICKSTART_TRIALS),
            "--storage",
            storage,
            "--study",
            "quickstart",
            "--json",
            out / "t.json",
            "--html",
            out / "t.html",
        )
        tune_s = _timed(tune)
        split = time_split(storage, "quickstart", tune_s)
    return ProfileAgainstTune(str(QUICKSTART), QUICKSTART_TRIALS, profile_s, tune_s, split)


def _tfperf(command: str, *options: str | Path) -> list[str]:
    arguments = [sys.executable, "-m", "tfperf", command, str(QUICKSTART), "--quiet"]
    return arguments + [str(option) for option in options]


def _timed(command: list[str]) -> float:
    """The wall time of `command`, run in the repository's root.

    Raises:
        RuntimeError: it failed; the message carries the end of its output.
    """
    started = time.monotonic()
    done = subprocess.run(
        command,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=COMMAND_TIMEOUT_S,
    )
    wall_s = time.monotonic() - started
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise RuntimeError(
            f"`{' '.join(command[2:])}` failed (exit status {done.returncode}); it ended "
            f"with:\n{tail}"
        )
    return wall_s
