"""Durations as a person writes them, read back in seconds."""

from __future__ import annotations

import pytest

from tfperf.units import parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("5ms", 0.005),
        ("0.02s", 0.02),
        ("20 ms", 0.02),
        ("0.5", 0.5),
        ("250us", 2.5e-4),
        ("5m", 300.0),
        ("1.5 min", 90.0),
        ("1h", 3600.0),
    ],
)
def test_a_duration_is_read_in_seconds(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["fast", "5 days", "-1ms", "ms", ""])
def test_what_is_no_duration_is_quoted(text):
    with pytest.raises(ValueError, match=f"{text!r} is not a duration: write a number and a unit"):
        parse_duration(text)


def test_a_duration_must_be_positive():
    with pytest.raises(ValueError, match="a duration must be positive, but got '0ms'"):
        parse_duration("0ms")
