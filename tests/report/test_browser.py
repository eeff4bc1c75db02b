"""The reports in a real headless Chromium: they load offline, draw, sort, and run no injected code.

Uses Debian's `chromium` (`.ci/run` installs it) through Playwright, with no browser download.
Screenshots of every report land in test-artifacts/ for a person to look at.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.deadlines import HANG_MS
from tests.reports import PLAN, Planned, fake_profile, make_study, with_stages
from tfperf.knobs import Knobs
from tfperf.report import render_profile_html, render_study_html, write_html
from tfperf.report._study_data import snapshot_study

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
EVIL = '<img src=x onerror="window.__pwned = 1"><script>window.__pwned = 1</script>'


def _chromium() -> str:
    found = os.environ.get("TFPERF_CHROMIUM") or shutil.which("chromium")
    if found is None:
        pytest.fail(
            "the browser tests need Chromium: `apt-get install chromium` (Debian; .ci/run "
            "does it), or set TFPERF_CHROMIUM to a Chromium executable."
        )
    return found


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    # Chromium's sandbox cannot start as root (CI containers): only then is it turned off.
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=_chromium(), args=args)
        yield launched
        launched.close()


@dataclass
class Visit:
    """A report opened in the browser, with what it logged and requested on the way."""

    page: object
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


def open_report(browser, path: Path, screenshot: str) -> Visit:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    visit = Visit(page)
    page.on("console", lambda m: visit.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda error: visit.errors.append(str(error)))
    page.on("request", lambda request: visit.requests.append(request.url))
    page.goto(path.as_uri())
    page.wait_for_function(
        "document.querySelectorAll('[data-chart]').length"
        " === document.querySelectorAll('[data-drawn]').length",
        timeout=HANG_MS,
    )
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{screenshot}.png"), full_page=True)
    return visit


def assert_loaded_offline_and_drawn(visit: Visit, path: Path, charts: int) -> None:
    assert visit.errors == []
    assert visit.requests == [path.as_uri()]
    drawn = visit.page.eval_on_selector_all(
        "[data-chart]", "els => els.map(e => e.querySelectorAll('svg.main-svg').length > 0)"
    )
    assert drawn == [True] * charts


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("reports")
    write_html(render_profile_html(with_stages(fake_profile(gpu=True))), folder / "profile.html")
    plan = tuple(
        Planned(p.knobs, p.examples_per_sec, p.status, p.peak_mib, p.reference, p.reason, host)
        for p, host in zip(PLAN, ("node-a", "node-b") * 4, strict=False)
    )
    study = make_study(plan=plan, best_result=fake_profile())
    write_html(
        render_study_html(snapshot_study(study, "sqlite:///studies/demo.db")), folder / "study.html"
    )
    return folder


def test_profile_report_draws_offline(browser, reports):
    path = reports / "profile.html"
    visit = open_report(browser, path, "profile-report")
    assert_loaded_offline_and_drawn(visit, path, charts=6)
    verdict = visit.page.inner_text("#verdict")
    assert "Highly input-bound" in verdict and "map(parse)" in verdict


def test_study_report_draws_offline(browser, reports):
    path = reports / "study.html"
    visit = open_report(browser, path, "study-report")
    # history, parallel coordinates, RAM (7 trials are too few to rank knobs); then the best
    # trial's five.
    assert_loaded_offline_and_drawn(visit, path, charts=8)
    assert visit.page.inner_text("#summary").startswith("Use trial 2's knobs")


def _column(page, index: int) -> list[str]:
    return page.eval_on_selector_all(
        "#trial-table tbody tr:not([hidden])",
        f"rows => rows.map(r => r.children[{index}].getAttribute('data-value'))",
    )


def test_trial_table_sorts_and_filters_by_host(browser, reports):
    page = open_report(browser, reports / "study.html", "study-report-sorted").page
    header = page.locator("#trial-table th", has_text="examples/s")
    header.click()
    ascending = [float(v) for v in _column(page, 2)]
    assert ascending == sorted(ascending)
    header.click()
    descending = [float(v) for v in _column(page, 2)]
    assert descending == sorted(ascending, reverse=True)
    assert header.get_attribute("aria-sort") == "descending"
    page.select_option("#host-filter", "node-b")
    assert set(_column(page, 5)) == {"node-b"}
    page.select_option("#host-filter", "")
    assert len(_column(page, 5)) == len(PLAN)


def test_injected_markup_is_shown_as_text_and_never_runs(browser, tmp_path):
    import dataclasses

    profile = dataclasses.replace(fake_profile(pipeline=f"{EVIL}.py"), advice=EVIL)
    write_html(render_profile_html(profile), tmp_path / "evil-profile.html")
    plan = (*PLAN[:4], Planned(Knobs(), None, "failed", reason=EVIL, host=EVIL))
    study = make_study(plan=plan, remeasure=False, pipeline=f"{EVIL}.py", name=EVIL)
    html = render_study_html(snapshot_study(study, "sqlite:///x.db"))
    write_html(html, tmp_path / "evil-study.html")
    for name in ("evil-profile", "evil-study"):
        visit = open_report(browser, tmp_path / f"{name}.html", name)
        assert visit.errors == []
        assert visit.page.evaluate("window.__pwned") is None
        assert EVIL in visit.page.inner_text("body")


def test_a_study_of_hundreds_of_trials_still_draws(browser, tmp_path):
    plan = tuple(
        Planned(
            Knobs(batch_size=16 * (1 + i % 4), num_parallel_calls=1 + i % 8, prefetch=i % 5),
            1000.0 + (i * 37) % 900,
            peak_mib=300 + (i * 13) % 400,
            reference="baseline" if i == 0 else None,
        )
        for i in range(300)
    )
    study = make_study(plan=plan, remeasure=False)
    path = write_html(render_study_html(snapshot_study(study, "memory")), tmp_path / "big.html")
    visit = open_report(browser, path, "study-report-300-trials")
    assert_loaded_offline_and_drawn(visit, path, charts=4)  # no stored profile: no best section
    assert visit.page.locator("#trial-table tbody tr").count() == 300


def test_the_patch_block_carries_the_diff_and_every_manual_edit(browser, tmp_path):
    from tests.report.helpers import tune_result
    from tfperf.results.tune import HandOver

    edit = 'Add keras.mixed_precision.set_global_policy("mixed_bfloat16") before the model.'
    handover = HandOver(root=str(tmp_path), diff="--- a.py\n+++ a.py\n", manual_edits=[edit])
    snapshot = snapshot_study(make_study(best_result=fake_profile()), "memory")
    html = render_study_html(snapshot, tune=tune_result(handover=handover))
    page = open_report(browser, write_html(html, tmp_path / "handover.html"), "patch").page
    assert page.inner_text("#patch-diff").startswith("--- a.py")
    assert page.inner_text("#patch-manual").strip() == edit
