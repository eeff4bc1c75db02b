"""The GPU memory flags of `tfperf profile` and `tfperf tune` (tfperf/cli/_devices.py): their
validation, and the layout they give the measuring child."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests import pipelines
from tests.reports import fake_profile
from tfperf.cli.main import build_parser
from tfperf.cli.profile import profile_in_child
from tfperf.cli.progress import ProgressDisplay
from tfperf.cli.tune import TuneCommand
from tfperf.frameworks import DeviceLayout
from tfperf.knobs import Knobs
from tfperf.results import TrialOutcome, TrialStatus
from tfperf.trials import Budgets, TrialRequest


def test_profile_runs_the_child_on_a_logical_gpu_device_of_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tfperf.trials

    sent: list[TrialRequest] = []

    def fake_run_trial(request: TrialRequest, budgets: Budgets, **_: Any) -> TrialOutcome:
        sent.append(request)
        return TrialOutcome(TrialStatus.COMPLETE, fake_profile(), "", 0, None, 0.0)

    monkeypatch.setattr(tfperf.trials, "run_trial", fake_run_trial)
    args = build_parser().parse_args(["profile", "p.py", "--gpu-memory-limit", "2048"])

    profile_in_child(args, Knobs(), ProgressDisplay(enabled=False), [])

    [request] = sent
    assert request.layout == DeviceLayout(gpu_memory_limit_mib=2048)


def test_tune_gives_every_trial_the_limit_and_pins_the_growth_knob(write_pipeline) -> None:
    import tfperf
    from tfperf.tuner import Tuner

    args = build_parser().parse_args(["tune", "pipeline.py", "--gpu-memory-limit", "1536"])
    options = TuneCommand._options(args)

    assert options.layout == DeviceLayout(gpu_memory_limit_mib=1536)
    assert options.fixes == {"gpu_memory_growth": None}  # growth does not apply under a limit
    pipeline = tfperf.load_pipeline(write_pipeline(pipelines.INPUT_BOUND))
    request = Tuner(pipeline, options).trial_request(pipeline.baseline)
    assert request.layout.gpu_memory_limit_mib == 1536


@pytest.mark.parametrize(("flag", "growth"), [("on", True), ("OFF", False)])
def test_growth_on_or_off_sets_the_layout_and_pins_the_knob(flag: str, growth: bool) -> None:
    args = build_parser().parse_args(["tune", "p.py", "--gpu-memory-growth", flag])
    options = TuneCommand._options(args)

    assert options.layout == DeviceLayout(gpu_memory_growth=growth)
    assert options.fixes == {"gpu_memory_growth": growth}


def test_an_explicit_fix_wins_over_the_pinned_growth() -> None:
    args = build_parser().parse_args(
        ["tune", "p.py", "--gpu-memory-growth", "on", "--fix", "gpu_memory_growth=false"]
    )

    assert TuneCommand._options(args).fixes == {"gpu_memory_growth": False}


def test_without_gpu_flags_nothing_is_pinned() -> None:
    options = TuneCommand._options(build_parser().parse_args(["tune", "p.py"]))

    assert options.layout == DeviceLayout()
    assert "gpu_memory_growth" not in options.fixes


@pytest.mark.parametrize("command", ["profile", "tune"])
def test_a_limit_and_growth_together_are_refused_naming_both_flags(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [command, "p.py", "--gpu-memory-limit", "2048", "--gpu-memory-growth", "on"]
    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args(argv)

    assert stopped.value.code == 2
    assert "--gpu-memory-growth: not allowed with argument --gpu-memory-limit" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--gpu-memory-limit", "0"], "must be a positive integer (>= 1), but got 0"),
        (["--gpu-memory-limit", "2G"], "must be a positive integer (>= 1), but got '2G'"),
        (["--gpu-memory-growth", "maybe"], "expected on or off, but got 'maybe'"),
    ],
)
def test_bad_values_are_refused_with_the_value(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["profile", "p.py", *argv])

    assert message in capsys.readouterr().err


def test_tune_prints_the_advice_of_the_recommended_trial(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)  # the NVML probe honours it
    from tests.fakes.gpu_profile import FITS, measured_on_fake_gpu
    from tests.report.helpers import measured, tune_result
    from tests.reports import make_study
    from tfperf.cli._gpu_memory import recommended_gpu_memory

    best = dataclasses.replace(measured("trial 2", [2000.0]), trial_number=2)
    with_gpu = make_study(best_result=measured_on_fake_gpu())  # trial 2 carries the result
    result = dataclasses.replace(tune_result(), best=best)

    text = recommended_gpu_memory(with_gpu, result)

    assert text.startswith("GPU memory per process")
    assert FITS in text
    assert recommended_gpu_memory(make_study(best_result=fake_profile()), result) == ""
