"""What `tfperf tune` shows while it runs: a bar over trials, then over the re-measurement.

A `TuneListener` (`tfperf.tuner`): the tuner says what happens, this renders it on stderr; a
quiet run disables the bar and keeps the one-line notes. Each phase of the end (re-measuring
the finalists, confirming the choice) is announced with its number of runs, and where stderr is
not a terminal (a log file, CI) and a bar draws nothing, each finished run is a line. Before the
re-measurement it checks that some trial completed (`check_something_completed`): with none
there is nothing to re-measure, and the error lists each trial's reason.
"""

from __future__ import annotations

import statistics
import sys
from typing import TYPE_CHECKING, Any

from tfperf.errors import TfperfError
from tfperf.study import prices
from tfperf.tuner import MIN_ROUNDS, TuneListener
from tfperf.units import format_names, format_seconds

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import optuna

    from tfperf.knobs import Knobs
    from tfperf.measure import Progress
    from tfperf.results import TrialOutcome
    from tfperf.study.cluster import LostTrial
    from tfperf.tuner import Expected, Finalist, Wait


#: A new line says the time left once it moved by over this share of what was last said.
EXPECTED_MOVES = 0.25


class NothingCompleted(TfperfError):
    """No trial of the study completed, so there is nothing to re-measure or recommend."""


def check_something_completed(study: optuna.Study) -> None:
    """Raises `NothingCompleted`, listing each trial's reason, unless a trial completed."""
    import optuna

    from tfperf.study import search_trials
    from tfperf.study.records import TrialRecord

    trials = search_trials(study)
    if any(trial.state is optuna.trial.TrialState.COMPLETE for trial in trials):
        return
    lines = []
    for trial in trials:
        record = TrialRecord.from_trial(trial)
        status = record.status.value if record.status is not None else trial.state.name.lower()
        lines.append(f"  trial {trial.number}: {status}: {record.reason or 'no reason recorded'}")
    raise NothingCompleted(
        f"no configuration of study {study.study_name!r} completed, so there is nothing to "
        "re-measure or recommend:\n" + "\n".join(lines) + "\nFix what the reasons say (run "
        "`tfperf profile` on the file to see one configuration fail in full), then run again."
    )


class TuneProgress(TuneListener):
    """A tqdm bar over trials (best so far in its postfix), then over re-measurement."""

    def __init__(self, trials: int | None, enabled: bool = True) -> None:
        self.trials = trials
        self.enabled = enabled
        self._bar: Any = None
        self._study: optuna.Study | None = None
        self._done = 0  # runs finished in the current re-measurement phase, of `_total`
        self._total = 0
        self._rerun_s: list[float] = []  # the re-measurement runs' seconds, to price the rest
        self._said_s: float | None = None  # the time left last said in a line
        self._postfix: dict[str, str] = {}  # the trial bar's: best so far, time left

    def __enter__(self) -> TuneProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def _new_bar(self, total: int | None, desc: str, initial: int = 0) -> None:
        from tqdm import tqdm

        self.close()
        if self.enabled:
            self._bar = tqdm(
                total=total,
                initial=initial,
                desc=desc,
                unit="trial",
                file=sys.stderr,
                dynamic_ncols=True,
                disable=None,
            )

    def _say(self, text: str) -> None:
        """A line above the bar (or alone without one), on stderr beside the bar."""
        if self._bar is not None:
            self._bar.write(text, file=sys.stderr)
        else:
            print(text, file=sys.stderr)

    def study_ready(
        self, study: optuna.Study, storage: str, resumed: int, orphans: list[int]
    ) -> None:
        note = (
            f"; failed lost trials {orphans} (their tuner stopped) and queued their knobs again"
            if orphans
            else ""
        )
        print(
            f"Study {study.study_name!r} in {storage}: {resumed} finished trials{note}.",
            file=sys.stderr,
        )
        self._study = study
        self._new_bar(self.trials, "tuning", initial=resumed)

    def trial_lost(self, lost: LostTrial) -> None:
        again = f" Its knobs run again as trial {lost.retry}." if lost.retry is not None else ""
        self._say(f"Trial {lost.number} failed: {lost.reason}.{again}")

    def own_trial_lost(self, number: int) -> None:
        self._say(
            f"Trial {number} was failed by another tuner: no heartbeat from this machine reached "
            "the storage in time (overloaded, or cut off from the database?). Its figures are "
            "dropped; its retry measures it again."
        )

    def waiting(self, kind: Wait, trials: Sequence[int], hosts: Sequence[str]) -> None:
        from tfperf.tuner import Wait

        where = f" on {', '.join(hosts)}" if hosts else ""
        numbers = ", ".join(str(number) for number in trials)
        if kind is Wait.TWIN:
            text = (
                f"Trial {numbers}{where} measures the same knobs as this tuner's next trial; "
                "waiting to reuse its figures."
            )
        elif kind is Wait.REMEASURE:
            text = (
                f"The final re-measurement runs{where} (lock trial {numbers}); waiting for its "
                "result."
                if trials
                else "Another tuner is taking the re-measurement lock; waiting."
            )
        else:
            text = (
                f"Every trial of the study is taken; waiting for trials {numbers}{where}. "
                "A trial whose tuner dies is failed and run again here."
            )
        self._say(text)

    def remeasure_adopted(self, worker: Mapping[str, Any]) -> None:
        self._say(
            f"The final figures were re-measured by {worker.get('host')} "
            f"(pid {worker.get('pid')}) for the whole study; this tuner re-measured nothing."
        )

    def hardware_mixed(self, groups: Mapping[str, Sequence[str]]) -> None:
        lines = "\n".join(f"  {', '.join(hosts)}: {kind}" for kind, hosts in groups.items())
        self._say(
            "Warning: this study mixes machines, so its timings are comparable only within "
            f"each group:\n{lines}\nCompare trials per host (the report's host column), or give "
            "each kind of machine its own --study."
        )

    def trial_started(self, number: int, label: str | None, knobs: Knobs) -> None:
        if self._bar is not None:
            self._bar.set_description(f"trial {number}" + (f" ({label})" if label else ""))

    def trial_progress(self, progress: Progress) -> None:
        return None

    def trial_finished(
        self,
        number: int,
        outcome: TrialOutcome | None,
        best: float | None,
        baseline: float | None,
    ) -> None:
        if not self._drawn():
            if self.enabled:
                figure = _figure(outcome) if outcome is not None else "repeats an earlier trial"
                self._say(f"  trial {number}: {figure}")
            return
        postfix = self._postfix
        if best is not None:
            postfix["best"] = f"{best:,.0f} ex/s"
            if baseline:
                postfix["vs baseline"] = f"{best / baseline:.2f}x (1 run each)"
        self._bar.set_postfix(postfix)
        self._bar.update(1)

    def expected(self, left: Expected) -> None:
        """The time left: a line after the first trial, and again where it moved by over a
        quarter; on a drawn bar, its postfix after every trial."""
        if self._drawn():
            self._postfix["left"] = f"~{_duration(left.seconds)}"
            self._bar.set_postfix(self._postfix)
        said = self._said_s
        if said is not None and abs(left.seconds - said) <= EXPECTED_MOVES * said:
            return
        self._said_s = left.seconds
        trial = f"about {_duration(left.run_s)}"
        if left.trials_left is None:
            search = (
                f"the search for {_duration(left.search_s)}, at {trial} a trial as the study's took"
            )
        elif left.trials_left:
            search = (
                f"{_count(left.trials_left, 'more trial')} at {trial} each, as the study's took"
            )
        else:
            search = "no more trials"
        self._say(
            f"Expected: about {_duration(left.seconds)} more: {search}, then about "
            f"{left.runs_after} re-measurement runs at about {_duration(left.rerun_s)} each."
        )

    def time_limit_reached(self, ran: int, left: Expected | None, limit_s: float | None) -> None:
        stops = (
            f"Time limit (--time-limit): the search stops after {_count(ran, 'trial')} of this run"
        )
        if left is None or limit_s is None:
            self._say(f"{stops}.")
            return
        takes = _duration(left.seconds)
        after = f"the re-measurement of its finalists and the references takes about {takes}"
        over = left.seconds - max(limit_s, 0.0)
        if over > EXPECTED_MOVES * left.seconds:  # beyond the estimate's own error
            after += (
                f", about {_duration(over)} past the limit: the references and the least "
                "re-measurement take that long here"
            )
        self._say(f"{stops}; {after}.")

    def remeasure_started(self, finalists: list[Finalist], rounds: int) -> None:
        """Starts the re-measurement's bar; stops the tuner when no trial ever completed.

        Re-measuring configurations that never finished once would only fail again, slowly.

        Raises:
            NothingCompleted: every trial of the study failed (their reasons in the message).
        """
        if self._study is not None:
            check_something_completed(self._study)
        least = [min(rounds, finalist.least_rounds) for finalist in finalists]
        total = len(finalists) * rounds
        if sum(least) == total:
            plan = f"{rounds} round{'s' * (rounds != 1)} interleaved ({_runs(total)}"
        else:
            first = min(least)
            plan = (
                f"{first} round{'s' * (first != 1)}, then up to {rounds} interleaved for those "
                f"whose next run could change the answer ({sum(least)} to {total} runs"
            )
        priced = prices(self._study) if self._study is not None else None
        if priced is not None:
            took = [priced.rerun_of(finalist.trial_number) for finalist in finalists]
            low = sum(t * n for t, n in zip(took, least, strict=True))
            high = sum(took) * rounds
            span = _duration(high) if low == high else f"{_duration(low)} to {_duration(high)}"
            plan += f"; about {span}"
        self._phase(
            f"Re-measuring {len(finalists)} finalists, {plan}), to choose on fresh figures...",
            total,
            "re-measuring finalists",
        )

    def confirm_started(self, labels: list[str], rounds: int) -> None:
        """Starts the confirmation's bar: the chosen configuration (and what it is weighed
        against) measured once more."""
        named = format_names(labels)
        # Past MIN_ROUNDS only configurations whose next run could change the answer run on:
        # a single one never does.
        least = len(labels) * min(rounds, MIN_ROUNDS)
        total = least if len(labels) < 2 else len(labels) * rounds
        self._phase(
            f"Confirming {named} on windows that played no part in choosing "
            f"({self._runs_priced(least, total)})...",
            total,
            f"confirming {named}",
        )

    def trim_started(self, labels: list[str], rounds: int) -> None:
        """Starts the bar of the answer measured beside its changes to training reverted."""
        total = len(labels) * rounds
        variants = len(labels) - 1
        self._phase(
            f"Measuring {labels[0]} beside {variants} variant{'s' * (variants != 1)}, each with "
            f"one of its changes to training reverted, {rounds} round{'s' * (rounds != 1)} "
            f"interleaved ({self._runs_priced(total, total)}), so only the changes that earn "
            "their gain are recommended...",
            total,
            "trimming",
        )

    def _runs_priced(self, least: int, total: int) -> str:
        """`least` to `total` runs (one figure when equal), priced at the median re-measurement
        run so far, where one has run."""
        cost = _runs(total) if least == total else f"{least} to {total} runs"
        if not self._rerun_s:
            return cost
        typical = statistics.median(self._rerun_s)
        span = _duration(typical * total)
        if least != total:
            span = f"{_duration(typical * least)} to {span}"
        return f"{cost}; about {span}"

    def remeasured(self, finalist: Finalist, outcome: TrialOutcome) -> None:
        self._rerun_s.append(outcome.wall_s)
        self._done += 1
        if self._drawn():
            self._bar.update(1)
        elif self.enabled:
            self._say(f"  {self._done}/{self._total} {finalist.label}: {_figure(outcome)}")

    def _phase(self, line: str, total: int, desc: str) -> None:
        """Announces a re-measurement phase of `total` runs and starts its bar."""
        self.close()
        self._say(line)
        self._done, self._total = 0, total
        self._new_bar(total, desc)

    def _drawn(self) -> bool:
        """Whether a bar is on screen (tqdm draws nothing where stderr is not a terminal)."""
        return self._bar is not None and not self._bar.disable


def _duration(seconds: float) -> str:
    """A wait as a person reads it: "45 s", "3.5 min"."""
    return f"{seconds / 60:.2g} min" if seconds >= 90 else format_seconds(max(seconds, 1.0))


def _runs(count: int) -> str:
    return _count(count, "run")


def _count(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' * (count != 1)}"


def _figure(outcome: TrialOutcome) -> str:
    """One finished run, for a line of the log."""
    from tfperf.results import TrialStatus

    if outcome.status is TrialStatus.COMPLETE and outcome.result is not None:
        return f"{outcome.result.end_to_end.examples_per_sec:,.0f} examples/s"
    return f"{outcome.status.value}: {outcome.reason}"
