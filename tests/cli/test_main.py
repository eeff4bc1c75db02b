"""`tfperf` on the command line: summaries, JSON, exit statuses and bad-input messages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import pipelines
from tests.deadlines import HANG_S
from tfperf.cli.main import EXIT_FAILED, EXIT_USAGE, main

REPO = Path(__file__).resolve().parents[2]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        status = main(list(argv))
    except SystemExit as exit_:  # argparse errors
        status = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.tf
def test_profile_prints_verdict_first_and_writes_json(capsys, write_pipeline, tmp_path):
    path = write_pipeline(pipelines.INPUT_BOUND)
    target = tmp_path / "out.json"
    status, out, err = run(
        capsys,
        "profile",
        str(path),
        "--steps",
        "5",
        "--warmup",
        "1",
        "--min-seconds",
        "0",
        "--json",
        str(target),
        "--quiet",
    )
    assert status == 0, err
    assert out.startswith("Verdict: HIGHLY INPUT-BOUND")
    assert "end to end" in out and "pipeline only" in out and "compute only" in out
    # The short answer: the verdict, the rates and the findings, where the rest is.
    answer = out[: out.index("Result JSON:")]
    assert len([line for line in answer.splitlines() if line.strip()]) <= 20
    assert "More: --verbose prints every figure" in out and "Host RAM: peak" not in out
    assert data_findings(target) and "[fix]" in out
    data = json.loads(target.read_text())
    assert data["verdict"] == "highly-input-bound"
    assert data["end_to_end"]["steps"] == 5


def data_findings(path) -> list[dict]:
    """The findings a saved profile JSON carries."""
    return list(json.loads(path.read_text())["findings"])


@pytest.mark.tf
def test_set_overrides_a_knob(capsys, write_pipeline, tmp_path):
    path = write_pipeline(pipelines.TRAIN_STEP)
    target = tmp_path / "r.json"
    status, _, err = run(
        capsys,
        "profile",
        str(path),
        "--steps",
        "2",
        "--set",
        "batch_size=3",
        "--set",
        "mixed_precision=float32",
        "--json",
        str(target),
        "--quiet",
    )
    assert status == 0, err
    assert json.loads(target.read_text())["knobs"]["batch_size"] == 3


def test_missing_file(capsys, tmp_path):
    status, _, err = run(capsys, "profile", str(tmp_path / "nope.py"))
    assert status == EXIT_USAGE
    assert "No such pipeline file" in err and "nope.py" in err
    assert "Traceback" not in err


def test_syntax_error_shows_the_line(capsys, write_pipeline):
    path = write_pipeline("def make_dataset(knobs):\n    return (\n")
    status, _, err = run(capsys, "profile", str(path))
    assert status == EXIT_USAGE
    assert "pipeline.py" in err and "line" in err
    assert "Traceback" not in err


def test_no_make_dataset_lists_functions(capsys, write_pipeline):
    path = write_pipeline("def load(): pass\ndef parse(x): pass\n")
    status, _, err = run(capsys, "profile", str(path))
    assert status == EXIT_USAGE
    assert "defines no `make_dataset`" in err and "load, parse" in err


def test_neither_model_nor_train_step(capsys, write_pipeline):
    path = write_pipeline("def make_dataset(knobs): pass\n")
    status, _, err = run(capsys, "profile", str(path))
    assert status == EXIT_USAGE
    assert "make_model" in err and "make_train_step" in err


def test_unknown_knob_in_baseline(capsys, write_pipeline):
    path = write_pipeline(
        "BASELINE = {'batchsize': 3}\ndef make_dataset(knobs): pass\ndef make_model(knobs): pass\n"
    )
    status, _, err = run(capsys, "profile", str(path))
    assert status == EXIT_USAGE
    assert "'batchsize'" in err and "Valid names: batch_size" in err


def test_bad_value_in_search_space(capsys, write_pipeline):
    path = write_pipeline(
        "SEARCH_SPACE = {'batch_size': [32, -1]}\n"
        "def make_dataset(knobs): pass\ndef make_model(knobs): pass\n"
    )
    status, _, err = run(capsys, "profile", str(path))
    assert status == EXIT_USAGE
    assert "SEARCH_SPACE" in err and "batch_size" in err and "-1" in err


@pytest.mark.parametrize(
    "flag", [("--steps", "-5"), ("--steps", "0"), ("--warmup", "-1"), ("--steps", "ten")]
)
def test_bad_counts_are_rejected_by_name(capsys, write_pipeline, flag):
    path = write_pipeline("def make_dataset(knobs): pass\n")
    status, _, err = run(capsys, "profile", str(path), *flag)
    assert status == EXIT_USAGE
    assert f"argument {flag[0]}" in err
    assert repr(flag[1]) in err or f"got {flag[1]}" in err


@pytest.mark.parametrize("command", ["profile", "tune"])
@pytest.mark.parametrize("value", ["-1", "nan", "inf", "long"])
def test_a_bad_min_seconds_is_rejected_with_its_value(capsys, write_pipeline, command, value):
    path = write_pipeline("def make_dataset(knobs): pass\n")
    status, _, err = run(capsys, command, str(path), "--min-seconds", value)
    assert status == EXIT_USAGE
    assert "argument --min-seconds" in err
    assert repr(value) in err


def test_bad_set_value_is_explained(capsys, write_pipeline):
    path = write_pipeline("def make_dataset(knobs): pass\n")
    status, _, err = run(capsys, "profile", str(path), "--set", "prefetch=-3")
    assert status == EXIT_USAGE
    assert "knob 'prefetch' must be an integer >= 0 or AUTOTUNE, but got -3" in err


@pytest.mark.tf
def test_runtime_failure_exits_1_without_traceback(capsys, write_pipeline):
    path = write_pipeline(pipelines.TRAIN_STEP.replace("range(12)", "range(0)"))
    status, _, err = run(capsys, "profile", str(path), "--quiet")
    assert status == EXIT_FAILED
    assert err.startswith("tfperf: error: pipeline.py: the dataset is empty")
    assert "Traceback" not in err


def test_help_explains_every_option(capsys):
    status, out, _ = run(capsys, "profile", "--help")
    assert status == 0
    for option in ("--steps", "--warmup", "--json", "--set", "--quiet", "--debug"):
        assert option in out


@pytest.mark.tf
def test_quickstart_from_the_console_script(tmp_path):
    """The README's demo, as a user runs it: a real process, default paths, exit status 0."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    script = Path(sys.executable).with_name("tfperf")
    completed = subprocess.run(
        [str(script), "profile", str(REPO / "examples/quickstart/pipeline.py"), "--steps", "10"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_S,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith("Verdict: ")
    assert (tmp_path / "reports" / "pipeline-profile.json").exists()
    html = tmp_path / "reports" / "pipeline-profile.html"
    assert f"HTML report: {html.relative_to(tmp_path)}" in completed.stdout
    assert 'id="verdict"' in html.read_text()
    assert "Traceback" not in completed.stderr


def test_top_level_help_lists_commands_and_debug(capsys):
    status, out, _ = run(capsys, "--help")
    assert status == 0
    assert "profile" in out and "--debug" in out and "--version" in out


def test_debug_shows_the_traceback(tmp_path):
    from tfperf.errors import PipelineFileError

    with pytest.raises(PipelineFileError, match="No such pipeline file"):
        main(["--debug", "profile", str(tmp_path / "nope.py")])
    with pytest.raises(PipelineFileError):
        main(["profile", "--debug", str(tmp_path / "nope.py")])
