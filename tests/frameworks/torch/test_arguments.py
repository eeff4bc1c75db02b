"""The argparse options a script adds, recorded and traced (`_arguments`), unit by unit."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

from tfperf.frameworks.torch._arguments import Options, recording_options, trace_own
from tfperf.results.discovery import ArgumentForm


def test_every_parser_and_group_adds_options_through_the_recorded_method() -> None:
    """`recording_options` wraps this private class's method: pinned against Python's own."""
    container = argparse._ActionsContainer
    parser = argparse.ArgumentParser()
    assert isinstance(parser, container)
    assert isinstance(parser.add_argument_group("g"), container)
    assert "add_argument" in vars(container)


def _parse(argv: list[str]) -> tuple[argparse.Namespace, Options]:
    """Builds this file's parser twice, one option in a group, under the recorder."""
    options = Options(Path(__file__).resolve().parent)
    with recording_options(options):
        for _ in range(2):
            parser = argparse.ArgumentParser()
            parser.add_argument("-j", "--workers", type=int, default=0)
            parser.add_argument_group("data").add_argument("--pin-mem", action="store_true")
    return parser.parse_args(argv), options


def test_options_are_recorded_once_each_with_where_they_are_written() -> None:
    _, options = _parse([])
    [workers] = options.by_dest["workers"]
    [pin] = options.by_dest["pin_mem"]
    assert (workers.default, workers.form) == (0, ArgumentForm.KEYWORD)
    assert (pin.default, pin.form) == (False, ArgumentForm.ABSENT)
    assert workers.place.file == Path(__file__).name and workers.place.call == "add_argument"
    assert argparse.ArgumentParser.add_argument is argparse._ActionsContainer.add_argument


def test_only_a_default_that_reached_the_call_is_traced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["train.py"])
    args, options = _parse([])
    assert _own(options, args, 0) is not None
    assert _own(options, args, 1) is None  # not what the call got
    given, options = _parse(["-j", "2"])
    assert _own(options, given, 2) is None  # a value given on the command line
    for argv in (["-j", "0"], ["-j0"], ["--workers=0"], ["--work", "0"]):
        monkeypatch.setattr(sys, "argv", ["train.py", *argv])
        given, options = _parse(argv)
        assert _own(options, given, 0) is None, argv  # the default's value, but given
    monkeypatch.setattr(sys, "argv", ["train.py", "--pin-mem"])
    given, options = _parse(["--pin-mem"])
    assert _own(options, given, 0) is not None  # another option given: this one's default


def _own(options: Options, args: argparse.Namespace, value: int) -> object:
    """`trace_own` from inside a call written `_call(..., num_workers=args.workers)`, as the
    recorder traces from inside `DataLoader(..., num_workers=args.workers)`."""
    frame = sys._getframe()
    return _call(
        lambda: trace_own(options, frame, "num_workers", 3, value), num_workers=args.workers
    )


def _call(function: object, **_: object) -> object:
    assert callable(function)
    return function()
