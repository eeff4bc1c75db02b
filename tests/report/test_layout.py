"""Report layout in a real headless Chromium: every page fits a phone and a desktop screen,
no table or code is cut inside its box, printed trial tables wrap between words.

The pages are built from the test fakes (tests/reports.py) with the content that widened
real reports: a strategy's device and input names, call-site knob names, unset knobs, a diff
with long lines. Widths are read from the DOM, never from pixels.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from html import unescape
from pathlib import Path

import pytest

from tests.deadlines import HANG_MS
from tests.report.helpers import tune_result
from tests.report.test_browser import browser  # noqa: F401  (a fixture)
from tests.report.test_distribution import distributed_profile
from tests.report.test_scaling import FEEDS_TWO, curve
from tests.reports import PLAN, Planned, fake_profile, make_study, with_stages
from tfperf.knobs import SERVICE_KNOBS, Knobs, framework_knobs
from tfperf.report import render_profile_html, render_study_html, write_html
from tfperf.report._study_data import snapshot_study
from tfperf.results.discovery import ArgumentForm, CallSite, Discovery
from tfperf.results.stages import AutotuneReadout
from tfperf.results.tune import HandOver, Measurement

PHONE, DESKTOP = 390, 1440
PRINT_WIDTH = 718  # px: A4 portrait within Chromium's default print margins
SITES = (
    "map@pipelines/imagenet_train.py:118.num_parallel_calls",
    "interleave@pipelines/imagenet_train.py:97.cycle_length",
    "prefetch@pipelines/imagenet_train.py:131.buffer_size",
)
DIFF = (
    "--- pipelines/imagenet_train.py\n+++ pipelines/imagenet_train.py\n@@ -118 +118 @@\n"
    "-ds = ds.map(decode_and_augment_the_example, num_parallel_calls=1, deterministic=False)\n"
    "+ds = ds.map(decode_and_augment_the_example, num_parallel_calls=8, deterministic=False)\n"
)

EDIT = (
    "pipelines/imagenet_train.py:131: add options.experimental_optimization.map_parallelization"
    "=True via ds = ds.with_options(options) before the prefetch"
)


def long_stage_names(result):
    """`with_stages(result)` with the stage labels a plain file's lambdas and paths give."""
    staged = with_stages(result)
    assert staged.stages is not None
    stages = [
        dataclasses.replace(stage, label=f"{stage.label.split('(')[0]}(<lambda>@{SITES[0]})")
        for stage in staged.stages.stages
    ]
    return dataclasses.replace(staged, stages=dataclasses.replace(staged.stages, stages=stages))


def zero_change_study(root: Path):
    """A study of a plain file: tfperf tuned its call sites, not knobs its code reads."""
    from tfperf.study.records import StudyRecord, write_study

    (root / "pipelines").mkdir()
    (root / "pipelines" / "imagenet_train.py").write_text("import tensorflow as tf\n")
    sites = tuple(
        CallSite(name, "pipelines/imagenet_train.py", int(name.split(":")[1].split(".")[0]),
                 None, None, None, name.split("@")[0], name.rsplit(".", 1)[1],
                 ArgumentForm.KEYWORD, None, 1)
        for name in SITES
    )  # fmt: skip
    values = ((1, 1, 1), (-1, -1, -1), (8, 4, 2), (4, 2, 8), (2, 8, 4))
    plan = tuple(
        Planned(Knobs.from_mapping(dict(zip(SITES, v, strict=True))), 1000.0 + 200 * i, reference=r)
        for i, (v, r) in enumerate(
            zip(values, ("baseline", "autotune", None, None, None), strict=True)
        )
    )
    study = make_study(plan=plan, remeasure=False, best_result=long_stage_names(fake_profile()))
    write_study(study, StudyRecord(discovery=Discovery(sites=sites), code_root=str(root)))
    return study


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("layout")
    scaled = dataclasses.replace(with_stages(distributed_profile()), scaling=curve(*FEEDS_TWO))
    # Two options left unset in some trials: their cells are the table's longest.
    options = {"deterministic": False, "private_threadpool_size": 4}
    plan = tuple(
        dataclasses.replace(
            p,
            host=f"worker-{i % 2}.example.internal",
            knobs=dataclasses.replace(p.knobs, **options) if i in (2, 3) else p.knobs,
        )
        for i, p in enumerate(PLAN)
    )
    handover = HandOver(root=str(folder), diff=DIFF, manual_edits=[])
    study = make_study(plan=plan, best_result=with_stages(fake_profile(gpu=True)))
    written = {
        "profile": render_profile_html(long_stage_names(fake_profile(gpu=True))),
        "scaling": render_profile_html(scaled),
        "study": render_study_html(
            snapshot_study(study, "memory"), tune=tune_result(handover=handover)
        ),
        "zero-change": render_study_html(
            snapshot_study(zero_change_study(folder), "memory"),
            tune=tune_result(handover=dataclasses.replace(handover, manual_edits=[EDIT])),
        ),
    }
    return {name: write_html(html, folder / f"{name}.html") for name, html in written.items()}


@pytest.fixture
def opened(browser, pages) -> Iterator[object]:  # noqa: F811
    opened_pages = []

    def open_page(name: str, width: int):
        page = browser.new_page(viewport={"width": width, "height": 900})
        opened_pages.append(page)
        page.goto(pages[name].as_uri())
        page.wait_for_function(
            "document.querySelectorAll('[data-chart]').length"
            " === document.querySelectorAll('[data-drawn]').length",
            timeout=HANG_MS,
        )
        return page

    yield open_page
    for page in opened_pages:
        page.close()


#: Each table, pre and code block whose content is wider than its box, unless a box around
#: it scrolls sideways by design (`overflow-x: auto`), as a wide table does on a phone.
CUT = """() => {
  const scrolls = el => {
    for (let box = el; box; box = box.parentElement) {
      const overflow = getComputedStyle(box).overflowX;
      if (overflow === 'auto' || overflow === 'scroll') return true;
    }
    return false;
  };
  return Array.from(document.querySelectorAll('table, pre, code, td, th'))
    .filter(el => el.offsetParent !== null && !scrolls(el))
    .filter(el => el.scrollWidth > el.clientWidth + 1
                  || el.getBoundingClientRect().right > window.innerWidth + 1)
    .map(el => `${el.tagName} ${el.id || el.className}: ${el.textContent.slice(0, 40)}`);
}"""


@pytest.mark.parametrize("width", [PHONE, DESKTOP])
@pytest.mark.parametrize("name", ["profile", "scaling", "study", "zero-change"])
def test_each_page_fits_the_screen_and_cuts_no_table_or_code(opened, name, width):
    page = opened(name, width)
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert page.evaluate(CUT) == []


@pytest.mark.parametrize("name", ["study", "zero-change"])
def test_the_trial_table_fits_a_desktop_screen(opened, name):
    page = opened(name, DESKTOP)
    table, box = page.eval_on_selector(
        "#trial-table", "t => [t.scrollWidth, t.parentElement.clientWidth]"
    )
    assert table <= box


def test_the_diff_shows_its_last_line_whole(opened):
    page = opened("study", DESKTOP)
    block = page.eval_on_selector(
        "#patch-diff", "p => [p.scrollWidth, p.clientWidth, p.scrollHeight, p.clientHeight]"
    )
    width, box_width, height, box_height = block
    assert width <= box_width and height <= box_height, block


#: Words of the trial table laid out over more than one line. A word runs between spaces,
#: hyphens and the <wbr> joints of names, the places a line may break by design.
BROKEN_WORDS = """() => {
  const broken = [];
  for (const cell of document.querySelectorAll('#trial-table th, #trial-table td')) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const word of node.data.matchAll(/[^\\s-]+/g)) {
        const range = document.createRange();
        range.setStart(node, word.index);
        range.setEnd(node, word.index + word[0].length);
        const lines = new Set(Array.from(range.getClientRects())
          .filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (lines.size > 1) broken.push(word[0]);
      }
    }
  }
  return broken;
}"""


@pytest.mark.parametrize("name", ["study", "zero-change"])
def test_a_printed_trial_table_wraps_between_words_and_fits_the_page(opened, name):
    page = opened(name, DESKTOP)
    page.emulate_media(media="print")
    page.set_viewport_size({"width": PRINT_WIDTH, "height": 1000})
    assert page.evaluate(BROKEN_WORDS) == []
    assert page.eval_on_selector("#trial-table", "t => t.getBoundingClientRect().right") <= (
        PRINT_WIDTH
    )


RAW = "tf.data's model could not be read: ValueError: Expected a DatasetV2, got PerReplica"


@pytest.mark.parametrize(
    ("strategy", "readout", "expected"),
    [
        (True, AutotuneReadout([], RAW), "under a tf.distribute strategy"),
        (True, AutotuneReadout([], None), "under a tf.distribute strategy"),
        (False, AutotuneReadout([], RAW), "did not hand over this iterator's tf.data model"),
        (False, AutotuneReadout([], "tf.data autotuning is off"), "Tf.data autotuning is off."),
    ],
)
def test_an_empty_autotune_section_says_why_and_never_shows_an_exception(
    strategy, readout, expected
):
    from tfperf.knobs import AUTOTUNE
    from tfperf.report import render_summary

    result = distributed_profile() if strategy else fake_profile()
    result = dataclasses.replace(
        result, autotune=readout, knobs=Knobs(batch_size=4, prefetch=AUTOTUNE).to_dict()
    )
    html = unescape(render_profile_html(result))
    section = html.split("<h2>What AUTOTUNE chose</h2>")[1].split("</section>")[0]
    assert expected in section
    for shown in (section, render_summary(result)):
        assert "ValueError" not in shown and "PerReplica" not in shown


def _hover_names(hover: str) -> set[str]:
    return {part.split("=")[0] for part in hover.split(" · ") if "=" in part}


def test_zero_change_hovers_name_only_the_call_sites_the_pipeline_uses(tmp_path):
    from tfperf.report import _study_charts as sc

    snapshot = snapshot_study(zero_change_study(tmp_path), "memory")
    hovers = [point.hover for point in sc.history(snapshot).points]
    hovers += [point.hover for point in sc.ram_tradeoff(snapshot).points]
    assert hovers and all(_hover_names(hover) == set(SITES) for hover in hovers), hovers


def test_a_study_of_knobs_still_names_every_knob_on_hover():
    from tfperf.report import _study_charts as sc

    snapshot = snapshot_study(make_study(remeasure=False), "memory")
    assert _hover_names(sc.history(snapshot).points[0].hover) == set(
        framework_knobs("tensorflow")
    ) - {
        "auto_shard_policy", "fetch_to_device", "per_replica_buffer_size", "gpu_memory_growth",
        *SERVICE_KNOBS,
    }  # fmt: skip


def test_an_unset_value_has_one_name_everywhere():
    from tfperf.report import _knob_charts as kc
    from tfperf.report import render_summary
    from tfperf.report._tune_text import training_warnings
    from tfperf.report._words import UNSET, knob_value

    assert knob_value(None) == UNSET == "not set"
    assert knob_value(None, "deterministic").startswith(f"{UNSET} (")
    assert kc._axis("deterministic", [None, True]).tick_text == (UNSET, "True")
    text = render_summary(
        dataclasses.replace(fake_profile(), knobs={"batch_size": 4, "deterministic": None})
    )
    assert f"deterministic={UNSET}" in text and "=None" not in text
    site = "batch@train.py:13.batch_size"
    baseline = Measurement("baseline", 0, Knobs.from_mapping({}).to_dict(), [1.0], 1, None)
    best = Measurement("best", 1, Knobs.from_mapping({site: 64}).to_dict(), [2.0], 1, None)
    assert f"({UNSET} → 64)" in training_warnings(best, baseline, [site])[0]
    for shown in (text, render_profile_html(fake_profile())):
        assert "not given" not in shown and ">None<" not in shown


@pytest.mark.parametrize(("width", "toolbar"), [(PHONE, False), (DESKTOP, True)])
def test_the_chart_toolbar_stays_off_a_phone(opened, width, toolbar):
    """On a phone the plotly toolbar sat over legends and axis labels; a desktop keeps it."""
    page = opened("study", width)
    buttons = page.evaluate(
        "Array.from(document.querySelectorAll('.js-plotly-plot'))"
        ".filter(p => p.offsetParent !== null)"
        ".map(p => p.querySelectorAll('.modebar-btn').length > 0)"
    )
    assert buttons and set(buttons) == {toolbar}
