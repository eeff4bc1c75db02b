"""Issue 54 item 6: a short study's re-measurement is sized to it, and `tfperf tune` says
before it starts how many runs it takes and about how long."""

from __future__ import annotations

import re
import time

import pytest

from tests import pipelines
from tests.fakes.trials import FakeRunner
from tfperf.knobs import Knobs

pytestmark = pytest.mark.tf

#: Runs the re-measurement of a 6-trial study took before: 6 finalists, 3 rounds.
BEFORE = 18


def _wait(knobs: Knobs) -> float:
    """Input wait shrinks with map parallelism: a ranking that settles at once."""
    workers = 4 if knobs.num_parallel_calls in (None, -1) else knobs.num_parallel_calls
    return 0.08 / workers


def test_a_six_trial_study_says_what_its_re_measurement_costs_and_runs_fewer(
    write_pipeline, monkeypatch, capsys, tmp_path
):
    from tfperf.cli.main import main

    runner = FakeRunner(wait_for=_wait)

    def slow_runner(request, budgets, **kwargs):  # type: ignore[no-untyped-def]
        time.sleep(0.05)  # so each trial has a duration the estimate reads
        return runner(request, budgets, **kwargs)

    monkeypatch.setattr("tfperf.tuner._tuner.run_trial", slow_runner)
    from tfperf.tuner import _tuner

    confirm = _tuner.confirm
    before_confirming: list[int] = []  # the runs made when the confirmation started

    def counted_confirm(*args, **kwargs):  # type: ignore[no-untyped-def]
        before_confirming.append(len(runner.requests))
        return confirm(*args, **kwargs)

    monkeypatch.setattr(_tuner, "confirm", counted_confirm)
    trim = _tuner.trim_answer
    before_trimming: list[int] = []  # the runs made when the answer's trimming was weighed

    def counted_trim(*args, **kwargs):  # type: ignore[no-untyped-def]
        before_trimming.append(len(runner.requests))
        return trim(*args, **kwargs)

    monkeypatch.setattr(_tuner, "trim_answer", counted_trim)
    path = write_pipeline(pipelines.TRAIN_STEP)
    outputs = ["--json", str(tmp_path / "t.json"), "--html", str(tmp_path / "t.html")]
    storage = ["--storage", f"sqlite:///{tmp_path}/s.db", "--seed", "1"]
    status = main(["tune", str(path), "--trials", "6", "--quiet", *storage, *outputs])
    err = capsys.readouterr().err
    assert status == 0, err
    said = re.search(
        r"Re-measuring (\d+) finalists, 1 round, then up to 3 interleaved for those whose next "
        r"run could change the answer \((\d+) to (\d+) runs; about [0-9.]+ s to [0-9.]+ s\)",
        err,
    )
    assert said is not None, err
    finalists, least, most = (int(group) for group in said.groups())
    # The baseline (and AUTOTUNE, where it has knobs) run two rounds for their spread; the
    # rest one, at least.
    assert finalists < least < 2 * finalists and most == 3 * finalists
    confirming = re.search(
        r"Confirming .* \((?:\d+ to )?(\d+) runs?; about [0-9.]+ s(?: to [0-9.]+ s)?\)", err
    )
    assert confirming is not None, err
    remeasured = before_trimming[0] - 6  # an answer's variants run after, on their own count
    assert before_trimming[0] <= before_confirming[0]
    # A ranking settled at once: the finalists behind after one round ran no second.
    assert least <= remeasured < 2 * finalists and most < BEFORE


def test_the_plan_names_the_rounds_every_finalist_runs_before_contention_decides(capsys):
    """Without their trials' figures (two objectives) finalists run two rounds first; the plan
    said "one round" whenever any finalist could stop early."""
    import dataclasses

    from tfperf.cli._tune_progress import TuneProgress
    from tfperf.tuner import Finalist

    plain = [Finalist("trial 3", 3, Knobs()), Finalist("baseline", 0, Knobs(), compared=True)]
    with TuneProgress(trials=4) as listener:
        listener.remeasure_started(plain, rounds=3)
        listener.remeasure_started([dataclasses.replace(plain[0], prior=100.0), plain[1]], 3)
    err = capsys.readouterr().err
    assert "Re-measuring 2 finalists, 2 rounds, then up to 3 interleaved" in err
    assert "(4 to 6 runs)" in err
    assert "Re-measuring 2 finalists, 1 round, then up to 3 interleaved" in err
    assert "(3 to 6 runs)" in err
