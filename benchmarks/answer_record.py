"""Time to an answer: where each `tfperf tune` spent its wall time, and one default profile
against an 8-trial tune of the quickstart, side by side, as plain records.

No TensorFlow, no Optuna and no other benchmark module here: `benchmarks.answer` measures
them, `benchmarks/record.py` holds them, `benchmarks.render_answer` renders them.
"""

from __future__ import annotations

import dataclasses

#: The issue's bar: an 8-trial tune of the quickstart takes at most this many default profiles.
TUNE_OVER_PROFILE_GOAL = 6.0


@dataclasses.dataclass
class TimeSplit:
    """Where one `tfperf tune` spent `wall_s` seconds, read from its study afterwards.

    Every figure sums over the study's trials that ran a process, `completed` and `stopped`
    of them (copies of a measured configuration and configurations refused before running
    take none):

    - `warmup_s`: each phase's warm-up steps (`PhaseResult.warmup.duration_s`; the first
      step's wait, the time to the first batch, is among them);
    - `phases_s`: each phase's measured window (`PhaseResult.duration_s`);
    - `stages_s`: the stage analysis (`StageReport.duration_s`, the baseline trial's);
    - `startup_s`: each completed trial's process wall (`TrialOutcome.wall_s`, the child's
      start to its end) less the three above: the interpreter's start, the imports, building
      the pipeline and the model, and whatever else the child did between its windows;
    - `stopped_s`: the process wall of the `stopped` trials, which did not complete (pruned while
      running, failed, over a budget);
    - `remeasure_s`: the final re-measurement, from its lock trial's start to its end (every
      lock trial's span, in Optuna's clock), `remeasure_runs` processes in all.

    `rest_s` is what none of them holds: the tuner's own work between processes (the sampler,
    the study's storage, the model's refit) and, for a `tfperf tune` command, its own start.
    """

    wall_s: float
    completed: int
    stopped: int
    startup_s: float
    warmup_s: float
    phases_s: float
    stages_s: float
    stopped_s: float
    remeasure_s: float
    remeasure_runs: int

    @property
    def rest_s(self) -> float:
        """`wall_s` less every other figure."""
        counted = (
            self.startup_s,
            self.warmup_s,
            self.phases_s,
            self.stages_s,
            self.stopped_s,
            self.remeasure_s,
        )
        return self.wall_s - sum(counted)

    @property
    def startup_per_trial_s(self) -> float | None:
        """Start-up and set-up per completed trial; None when none completed."""
        return self.startup_s / self.completed if self.completed > 0 else None


@dataclasses.dataclass
class ProfileAgainstTune:
    """One default `tfperf profile` of `pipeline`, then `tfperf tune --trials N` of it on a
    fresh study, each the wall time of its command run in a child, one after the other."""

    pipeline: str
    trials: int
    profile_s: float
    tune_s: float
    #: The tune's time split, read from its study; None when the study could not be read.
    split: TimeSplit | None = None

    @property
    def ratio(self) -> float | None:
        """Tune over profile; None without a profile time."""
        return self.tune_s / self.profile_s if self.profile_s > 0 else None
