"""The reports of a real study and a real profile in headless Chromium, as a person reads them.

One tiny `tfperf tune` and one `tfperf profile` of the quickstart pipeline run once for the
module (few trials, few steps); each test then opens the pages they wrote: the answer at the
top, one figure per configuration everywhere, phones, print, text alternatives, hover text.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deadlines import HANG_MS, HANG_S
from tests.report.test_browser import browser, open_report  # noqa: F401  (a fixture)

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart" / "pipeline.py"
PHONE = {"width": 390, "height": 844}
PRINT_WIDTH = 718  # px: A4 portrait within Chromium's default print margins


@dataclasses.dataclass(frozen=True)
class Real:
    study: Path
    profile: Path


def _tfperf(*args: str, cwd: Path) -> None:
    command = [str(Path(sys.executable).with_name("tfperf")), *args]
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=HANG_S)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def real(tmp_path_factory) -> Real:
    folder = tmp_path_factory.mktemp("real")
    storage = f"sqlite:///{folder / 'study.db'}"
    # A few steps each, not a steady window: these pages are read, not their figures.
    small = ("--steps", "6", "--warmup", "2", "--min-seconds", "0")
    _tfperf("tune", str(QUICKSTART), "--trials", "3", *small, "--finalists", "1",
            "--rounds", "2", "--storage", storage, "--study", "quick",
            "--html", str(folder / "study.html"), cwd=folder)  # fmt: skip
    _tfperf("profile", str(QUICKSTART), *small, "--json", str(folder / "profile.json"),
            "--html", str(folder / "profile.html"), cwd=folder)  # fmt: skip
    return Real(folder / "study.html", folder / "profile.html")


def _rate(text: str) -> float:
    """The first figure of a cell: "2,690 ± 0% (2 runs)" -> 2690.0."""
    found = re.search(r"[\d,]+(\.\d+)?", text)
    assert found is not None, text
    return float(found.group(0).replace(",", ""))


def test_the_baseline_verdict_is_at_the_top_of_the_study_page(browser, real):  # noqa: F811
    page = open_report(browser, real.study, "real-study").page
    first = page.eval_on_selector("main > section", "e => e.id")
    assert first == "answer"
    baseline = page.inner_text("#answer-baseline")
    assert re.search(r"Your baseline: \d+% of each step waiting for input", baseline)
    assert "tfperf tune`" not in page.inner_text("body")  # no advice to run what just ran


def test_a_remeasured_configuration_shows_one_figure_everywhere(browser, real):  # noqa: F811
    page = open_report(browser, real.study, "real-study-figures").page
    summary = page.eval_on_selector_all(
        "#summary-table tbody tr[data-trial]",
        "rows => rows.filter(r => r.dataset.trial !== '')"
        ".map(r => [Number(r.dataset.trial), r.querySelector('.summary-rate').textContent])",
    )
    assert len(summary) >= 3  # the recommendation, both references (and any other finalist)
    for trial, shown in summary:
        cell = page.inner_text(f"#trial-table tr[data-trial='{trial}'] .trial-rate")
        assert _rate(cell) == _rate(shown), (trial, cell, shown)
        assert "runs)" in cell  # re-measured: median ± spread over its runs
        plotted = page.evaluate(
            """trial => {
              const plot = document.querySelector('[data-chart="history"]');
              for (const trace of plot.data) {
                const i = (trace.hovertext || []).findIndex(t => t.startsWith(`trial ${trial} ·`));
                if (i >= 0) return trace.y[i];
              }
              return null;
            }""",
            trial,
        )
        assert plotted is not None and round(plotted) == _rate(shown), (trial, plotted)


def test_hover_text_of_a_trial_point_names_its_knobs(browser, real):  # noqa: F811
    page = open_report(browser, real.study, "real-study-hover").page
    text = page.evaluate(
        """() => {
          const plot = document.querySelector('[data-chart="history"]');
          Plotly.Fx.hover(plot, [{curveNumber: 0, pointNumber: 0}]);
          return plot.querySelector('.hoverlayer').textContent;
        }"""
    )
    assert re.match(r"trial \d+ · [\d,]+ examples/s", text)
    assert "batch_size=" in text and "num_parallel_calls=" in text


@pytest.mark.parametrize("name", ["study", "profile"])
def test_no_sideways_scroll_on_a_phone(browser, real, name):  # noqa: F811
    page = browser.new_page(viewport=PHONE)
    page.goto(getattr(real, name).as_uri())
    page.wait_for_function("document.querySelectorAll('[data-drawn]').length > 0")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    page.close()


@pytest.mark.parametrize("name", ["study", "profile"])
def test_printed_pages_keep_every_chart_within_the_page(browser, real, name):  # noqa: F811
    page = open_report(browser, getattr(real, name), f"real-{name}-print").page
    page.emulate_media(media="print")
    page.set_viewport_size({"width": PRINT_WIDTH, "height": 1000})
    page.wait_for_function(
        f"Array.from(document.querySelectorAll('.js-plotly-plot svg.main-svg'))"
        f".every(s => s.getBoundingClientRect().width <= {PRINT_WIDTH})",
        timeout=HANG_MS,
    )
    assert page.evaluate("document.documentElement.scrollWidth") <= PRINT_WIDTH
    pdf = page.pdf(format="A4")
    assert pdf.startswith(b"%PDF")


@pytest.mark.parametrize("name", ["study", "profile"])
def test_every_chart_has_a_text_alternative(browser, real, name):  # noqa: F811
    page = open_report(browser, getattr(real, name), f"real-{name}-alt").page
    found = page.eval_on_selector_all(
        ".js-plotly-plot",
        """plots => plots.map(p => [p.getAttribute('aria-label') || '',
             p.nextElementSibling && p.nextElementSibling.matches('details.chart-data')
               ? p.nextElementSibling.querySelectorAll('tbody tr').length : 0])""",
    )
    assert found, "no chart drawn"
    for label, rows in found:
        assert len(label) > 20 and rows > 0, (label, rows)
