"""The device flags shared by `tfperf profile` and `tfperf tune`."""

from __future__ import annotations

import argparse

import pytest

from tfperf.cli._devices import add_device_arguments, device_options
from tfperf.frameworks import DeviceLayout, StrategyKind


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_device_arguments(parser)
    return parser.parse_args(argv)


@pytest.mark.parametrize(
    ("argv", "layout", "strategy"),
    [
        ((), DeviceLayout(), None),  # the file's make_strategy(), else none
        (("--cpu-replicas", "1"), DeviceLayout(cpu_replicas=1), None),
        (("--cpu-replicas", "2"), DeviceLayout(cpu_replicas=2), StrategyKind.MIRRORED),
        (
            ("--cpu-replicas", "2", "--strategy", "default"),
            DeviceLayout(cpu_replicas=2),
            StrategyKind.DEFAULT,
        ),
        (("--strategy", "one-device"), DeviceLayout(), StrategyKind.ONE_DEVICE),
    ],
)
def test_device_options_from_the_flags(
    argv: tuple[str, ...], layout: DeviceLayout, strategy: StrategyKind | None
) -> None:
    assert device_options(parse(*argv)) == (layout, strategy)


def test_an_unknown_strategy_or_zero_replicas_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        parse("--strategy", "tpu")
    assert "invalid StrategyKind value: 'tpu'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse("--cpu-replicas", "0")
