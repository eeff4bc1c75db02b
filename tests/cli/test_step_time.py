"""`--step-time` and `--accelerator-speedup` on the command line (issue 47, item 1)."""

from __future__ import annotations

import json

import pytest

from tests import pipelines
from tfperf.cli._common_args import duration
from tfperf.cli.main import EXIT_USAGE, main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        status = main(list(argv))
    except SystemExit as exit_:  # argparse errors
        status = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize(("text", "seconds"), [("5ms", 0.005), ("0.02s", 0.02), ("20 ms", 0.02)])
def test_a_duration_reads_as_written(text, seconds):
    assert duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("command", ["profile", "tune"])
def test_a_step_time_that_is_no_duration_is_named(capsys, write_pipeline, command):
    path = write_pipeline(pipelines.TUNER_SOURCE)
    status, _, err = run(capsys, command, str(path), "--step-time", "fast")
    assert status == EXIT_USAGE
    assert "--step-time" in err and "'fast' is not a duration" in err and "5ms" in err


def test_a_speedup_goes_with_a_real_model_not_an_emulated_step(capsys, write_pipeline):
    path = write_pipeline(pipelines.TUNER_SOURCE)
    argv = ["profile", str(path), "--step-time", "5ms", "--accelerator-speedup", "4"]
    status, _, err = run(capsys, *argv)
    assert status == EXIT_USAGE
    assert "--accelerator-speedup: not allowed with argument --step-time" in err


@pytest.mark.tf
def test_profile_with_step_time_reports_the_emulated_utilisation(capsys, write_pipeline, tmp_path):
    path = write_pipeline(pipelines.INPUT_ONLY_5MS)
    json_path, html_path = tmp_path / "r.json", tmp_path / "r.html"
    status, out, err = run(
        capsys,
        "profile",
        str(path),
        "--step-time",
        "2ms",
        "--steps",
        "10",
        "--warmup",
        "2",
        "--min-seconds",
        "0",
        "--no-stages",
        "--debug",  # in this process: no second TensorFlow import
        "--quiet",
        "--json",
        str(json_path),
        "--html",
        str(html_path),
    )
    assert status == 0, err
    assert "Compute emulated (--step-time): each step slept 2 ms" in out
    assert "Emulated step of 2 ms: waits" in out and "MLPerf Storage's 90% bar" in out
    data = json.loads(json_path.read_text())
    assert data["emulated_step_s"] == 0.002
    utilisation = data["utilisation"]
    assert utilisation["points"][0]["source"] == "emulated"
    assert utilisation["min_step_s"] == pytest.approx(0.9 * utilisation["input_interval_s"])
    # The same sentence in the HTML report as in the terminal: one source of words.
    verdict = next(line.strip() for line in out.splitlines() if "or longer at least 90%" in line)
    assert verdict in html_path.read_text()
