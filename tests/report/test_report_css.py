"""The report's stylesheet: every pill's text meets WCAG AA contrast (4.5:1) on its background.

The colours are read from templates/report.css itself (custom properties resolved), so a
change to a colour that makes a pill hard to read fails here, not only in a manual audit.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tfperf.results import TrialStatus

CSS = (Path(__file__).parents[2] / "tfperf/report/templates/report.css").read_text()
AA = 4.5


def _variables() -> dict[str, str]:
    root = re.search(r":root\s*\{([^}]*)\}", CSS)
    assert root is not None, "report.css has no :root block of colours"
    return dict(re.findall(r"(--[\w-]+)\s*:\s*([^;]+);", root.group(1)))


def _rules() -> list[tuple[list[str], dict[str, str]]]:
    """Top-level rules as (selectors, declarations); @media blocks are left out."""
    flat = re.sub(r"@media[^{]*\{(?:[^{}]*\{[^}]*\})*\s*\}", "", CSS)
    rules = []
    for selectors, body in re.findall(r"([^{}]+)\{([^}]*)\}", flat):
        declarations = dict(re.findall(r"([\w-]+)\s*:\s*([^;]+)", body))
        rules.append(([s.strip() for s in selectors.split(",")], declarations))
    return rules


def _colour(value: str) -> str:
    variables = _variables()
    value = value.strip()
    while value.startswith("var("):
        value = variables[value[4:-1].strip()].strip()
    assert re.fullmatch(r"#[0-9a-fA-F]{6}", value), f"not a #rrggbb colour: {value}"
    return value


def _luminance(colour: str) -> float:
    def channel(hex_pair: str) -> float:
        c = int(hex_pair, 16) / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(colour[i : i + 2]) for i in (1, 3, 5))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(foreground: str, background: str) -> float:
    """The WCAG 2 contrast ratio of two #rrggbb colours, from 1 to 21."""
    high, low = sorted((_luminance(foreground), _luminance(background)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def pill_colours(css_class: str | None) -> tuple[str, str]:
    """The text and background colour of `<span class="pill {css_class}">`, as the cascade
    resolves them: the class's own rule, else `.pill`, else the body's ink."""
    body = next(d for s, d in _rules() if "body" in s)
    pill = next(d for s, d in _rules() if ".pill" in s)
    own = next((d for s, d in _rules() if css_class and f".{css_class}" in s), {})
    foreground = own.get("color") or pill.get("color") or body["color"]
    background = own.get("background") or pill["background"]
    return _colour(foreground), _colour(background)


def test_contrast_matches_the_wcag_reference_values():
    assert contrast("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast("#777777", "#ffffff") == pytest.approx(4.48, abs=0.01)  # just under AA


@pytest.mark.parametrize(
    "css_class",
    [None, "status-warn", *(f"status-{status.value}" for status in TrialStatus), "status-fail"],
)
def test_every_pill_meets_aa_contrast(css_class):
    foreground, background = pill_colours(css_class)
    ratio = contrast(foreground, background)
    assert ratio >= AA, f"pill {css_class}: {foreground} on {background} is {ratio:.2f}:1"
