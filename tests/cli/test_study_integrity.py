"""Issue 48, items 8 and 9: a study stays one pipeline's, and its end is said as it is.

Real SQLite files and the real CLI; trials run on a fake runner where what is asserted is the
study's bookkeeping and the messages, never a figure or a duration.
"""

from __future__ import annotations

import optuna

from tests import pipelines
from tests.fakes.trials import FakeRunner, outcome
from tfperf.cli.main import EXIT_FAILED, main
from tfperf.results import TrialStatus


def _tune(path, tmp_path, *flags: str) -> list[str]:
    return [
        "tune",
        str(path),
        "--storage",
        f"sqlite:///{tmp_path / 'study.db'}",
        "--json",
        str(tmp_path / "out" / "t.json"),
        "--html",
        str(tmp_path / "out" / "t.html"),
        "--quiet",
        *flags,
    ]


def test_every_trial_over_the_ram_budget_names_it_and_writes_the_report(
    capsys, monkeypatch, write_pipeline, tmp_path
):
    path = write_pipeline(pipelines.TUNER_SOURCE)
    runner = FakeRunner(
        outcome=lambda index, _: outcome(TrialStatus.RAM_BUDGET, "over the budget", 300 << 20)
    )
    monkeypatch.setattr("tfperf.tuner._tuner.run_trial", runner)
    (tmp_path / "out").mkdir()
    status = main(_tune(path, tmp_path, "--trials", "2", "--ram-budget", "200MB"))
    err = capsys.readouterr().err
    assert status == EXIT_FAILED, err
    assert "went over a memory budget" in err and "--ram-budget 200 MiB" in err, err
    assert "the smallest peak RAM measured 300 MiB" in err
    assert "failed in every re-measurement" not in err
    assert f"Report: {tmp_path / 'out' / 't.html'}" in err
    assert (tmp_path / "out" / "t.html").is_file()
    study = optuna.load_study(study_name="pipeline", storage=f"sqlite:///{tmp_path / 'study.db'}")
    assert [t.user_attrs["status"] for t in study.trials] == ["ram-budget", "ram-budget"]


def test_a_knobs_file_edited_since_its_study_began_is_refused_with_the_fix(
    capsys, monkeypatch, write_pipeline, tmp_path
):
    path = write_pipeline(pipelines.TUNER_SOURCE)
    monkeypatch.setattr("tfperf.tuner._tuner.run_trial", FakeRunner())
    (tmp_path / "out").mkdir()
    argv = _tune(path, tmp_path, "--trials", "2", "--rounds", "1")
    assert main(argv) == 0, capsys.readouterr().err
    path.write_text(path.read_text() + "\nEXTRA = 1\n", encoding="utf-8")
    capsys.readouterr()
    database = tmp_path / "study.db"
    before = database.read_bytes()
    status = main(argv)
    err = capsys.readouterr().err
    assert status == 2, err
    assert "pipeline.py (or a file of its own it reads) changed since its study began" in err
    assert f"the 2 finished trials of sqlite:///{database} (study 'pipeline') measured" in err
    assert "Start a new study with --study NAME" in err
    assert database.read_bytes() == before  # nothing was added to the study
