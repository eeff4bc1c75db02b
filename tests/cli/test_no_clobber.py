"""No output flag replaces an input or another output: each case leaves the file byte-identical.

The check runs before anything is measured, so every case here ends in a second with exit 2
(bad input) and a message naming the flag, the file and what it is.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests import pipelines
from tfperf.cli.main import EXIT_USAGE, main


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # default outputs (reports/, studies/) land here, not the repo
    return tmp_path


def _refused(argv: list[str], keep: Path, capsys: pytest.CaptureFixture[str]) -> str:
    before = keep.read_bytes()
    assert main(argv) == EXIT_USAGE
    assert keep.read_bytes() == before
    return capsys.readouterr().err


def test_profile_json_over_the_pipeline_file(folder, capsys):
    victim = folder / "victim.py"
    victim.write_text(pipelines.TRAIN_STEP)
    err = _refused(["profile", str(victim), "--json", str(victim)], victim, capsys)
    assert "--json" in err and "victim.py is the pipeline file" in err


def test_tune_patch_over_the_script(folder, capsys):
    script = folder / "train.py"
    script.write_text(pipelines.TRAIN_STEP)
    err = _refused(["tune", str(script), "--write-patch", str(script)], script, capsys)
    assert "--write-patch" in err and "is the pipeline file" in err


@pytest.mark.parametrize("storage_flag", [True, False], ids=["--storage", "default storage"])
def test_tune_json_over_the_study_database(folder, capsys, storage_flag):
    pipeline = folder / "small.py"
    pipeline.write_text(pipelines.TRAIN_STEP)
    database = folder / "studies" / "small.db"
    database.parent.mkdir()
    sqlite3.connect(database).execute("create table trials (n int)").connection.close()
    argv = ["tune", str(pipeline), "--json", "studies/small.db"]
    if storage_flag:
        argv += ["--storage", f"sqlite:///{database}"]
    err = _refused(argv, database, capsys)
    assert "is the study storage" in err


def test_json_and_html_on_one_path(folder, capsys):
    pipeline = folder / "p.py"
    pipeline.write_text(pipelines.TRAIN_STEP)
    same = folder / "same.out"
    same.write_text("kept")
    err = _refused(
        ["profile", str(pipeline), "--json", "same.out", "--html", "same.out"], same, capsys
    )
    assert "--json and --html are the same file" in err


def test_profile_json_over_a_module_the_pipeline_imports(folder, capsys):
    (folder / "helpers.py").write_text("BATCH = 4\n")
    pipeline = folder / "uses_helpers.py"
    pipeline.write_text("import helpers\n" + pipelines.TRAIN_STEP)
    err = _refused(
        ["profile", str(pipeline), "--json", "helpers.py"], folder / "helpers.py", capsys
    )
    assert "helpers.py is a file of uses_helpers.py's" in err


def test_a_study_name_cannot_lead_reports_out_of_their_folder(folder, capsys):
    from tfperf.cli.main import build_parser
    from tfperf.cli.tune import _check_outputs

    pipeline = folder / "p.py"
    pipeline.write_text(pipelines.TRAIN_STEP)
    args = build_parser().parse_args(["tune", str(pipeline), "--study", "../../../escaped"])
    outputs = _check_outputs(args)
    for path in (outputs.json, outputs.html):
        assert path.resolve().parent == (folder / "reports").resolve()


def test_default_profile_names_of_two_pipelines_of_one_name_differ(folder):
    from tfperf.cli._outputs import profile_stem

    reports = folder / "reports"
    reports.mkdir()
    first, second = folder / "a" / "pipeline.py", folder / "b" / "pipeline.py"
    for path in (first, second):
        path.parent.mkdir()
        path.write_text(pipelines.TRAIN_STEP)
    assert profile_stem(first, reports) == "pipeline"  # free
    (reports / "pipeline-profile.json").write_text('{"pipeline": "a/pipeline.py"}')
    assert profile_stem(first, reports) == "pipeline"  # its own report, written again
    assert profile_stem(second, reports) == "b-pipeline"
    (reports / "b-pipeline-profile.json").write_text('{"pipeline": "elsewhere/b/pipeline.py"}')
    assert profile_stem(second, reports).startswith("pipeline-")  # a digest of its path
