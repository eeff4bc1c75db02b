"""Page assembly: self-contained, escaped, written atomically. The browser tests draw them."""

from __future__ import annotations

import dataclasses
import json
import re
import stat

import pytest

from tests.reports import PLAN, Planned, fake_profile, make_study, with_stages
from tfperf.findings import conclude
from tfperf.report import render_profile_html, render_study_html, write_html
from tfperf.report._html import Charts
from tfperf.report._study_data import snapshot_study

EVIL = "<script>window.__pwned = 1</script>"


@pytest.fixture(scope="module")
def profile_html() -> str:
    return render_profile_html(with_stages(fake_profile(gpu=True)))


def _tags(html: str) -> list[str]:
    # Only the page's own markup: the inlined scripts and chart JSON are dropped.
    return re.findall(r"<[a-z][^>]*>", re.sub(r"<script.*?</script>", "", html, flags=re.S))


def test_profile_page_is_self_contained(profile_html):
    tags = _tags(profile_html)
    assert not [tag for tag in tags if re.search(r"(src|href)=\"(https?:)?//", tag)]
    assert not [tag for tag in tags if tag.startswith("<link")]
    assert profile_html.count("<script") == 3  # chart data, plotly.js, tfperf's script
    assert "Plotly" in profile_html


def test_profile_page_carries_every_section(profile_html):
    for text in (
        "Highly input-bound",
        "67%",  # wait fraction
        "3.00\u00d7",  # speed-up if input were free: 3.00x
        "Configuration measured",
        "Environment",
        "NVIDIA H100 80GB HBM3",
        "Which stage limits the pipeline",
        "What AUTOTUNE chose",
        "tuned while running",
    ):
        assert text in profile_html
    charts = set(re.findall(r'data-chart="([^"]+)"', profile_html))
    assert charts == {
        "profile-throughput",
        "profile-timeline",
        "profile-distribution",
        "profile-memory",
        "profile-cpu",
        "profile-stages",
    }
    data = json.loads(_chart_json(profile_html))
    assert set(data) == charts


def test_user_text_is_escaped_everywhere():
    result = dataclasses.replace(fake_profile(pipeline=f"{EVIL}.py"), advice=EVIL)
    html = render_profile_html(result)
    assert EVIL not in html
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in html

    plan = (*PLAN[:4], Planned(PLAN[4].knobs, None, "failed", reason=EVIL, host=EVIL))
    study = make_study(plan=plan, remeasure=False, pipeline=f"{EVIL}.py", name=EVIL)
    html = render_study_html(snapshot_study(study, f"sqlite:///{EVIL}"))
    assert EVIL not in html
    assert html.count("&lt;script&gt;window.__pwned") >= 4


def test_chart_json_cannot_close_its_script_element():
    import plotly.graph_objects as go

    charts = Charts()
    charts.add("x", go.Figure(go.Bar(x=[1], y=[1], name="</script><b>&")))
    text = charts.to_json()
    assert "</script>" not in text and "<" not in text and "&" not in text
    assert json.loads(text)["x"]["data"][0]["name"] == "</script><b>&"


def test_study_page_sections():
    html = render_study_html(snapshot_study(make_study(best_result=fake_profile()), "memory"))
    for text in (
        "Use trial 2&#39;s knobs",
        "vs your baseline:",
        "The winner changes the batch size",
        "Ready to paste",
        "Every trial",
        "Profile of the recommended configuration (trial 2)",
    ):
        assert text in html
    charts = set(re.findall(r'data-chart="([^"]+)"', html))
    # Importances of a 6-trial study are not ranked: a sentence says so instead of a chart.
    assert {"history", "ram", "parallel", "best-throughput"} <= charts
    assert "importances" not in charts
    assert "too few trials to rank knobs" in html
    assert html.count('<tr data-host="node-a"') == len(PLAN)


def test_study_page_without_any_completed_trial():
    plan = (Planned(PLAN[0].knobs, None, "failed", reason="boom"),)
    html = render_study_html(snapshot_study(make_study(plan=plan, remeasure=False), "m"))
    assert "No configuration has completed yet" in html
    assert "boom" in html
    assert "data-chart=" not in html


def test_write_html_is_atomic_and_readable(tmp_path, profile_html):
    target = write_html(profile_html, tmp_path / "deep" / "r.html")
    assert target.read_text() == profile_html
    assert stat.S_IMODE(target.stat().st_mode) & 0o044  # group/other may read, as with cp
    assert [p.name for p in target.parent.iterdir()] == ["r.html"]


def _chart_json(html: str) -> str:
    match = re.search(r'<script type="application/json" id="tfperf-charts">(.*?)</script>', html)
    assert match is not None
    return match.group(1)


def test_terms_a_user_may_not_know_are_explained_on_hover():
    html = render_study_html(snapshot_study(make_study(best_result=fake_profile()), "memory"))
    explained = dict(re.findall(r'<abbr title="([^"]+)">([^<]+)</abbr>', html))
    terms = {term: title for title, term in explained.items()}
    for term in ("Pareto front", "PED-ANOVA", "spread", "compute-only ceiling"):
        assert term in terms, f"{term!r} has no hover explanation"
        assert len(terms[term]) > len(term) + 20
    assert "faster and using less RAM" in terms["Pareto front"]


def test_the_profile_page_carries_the_limit_the_source_line_and_the_order_flag():
    from tfperf.results import Limit, LimitBound, LimitTerm

    result = with_stages(fake_profile())
    limit = Limit(2400.0, LimitBound.CPU, "The host's cores bound it.", [])
    limit.terms.append(LimitTerm(LimitBound.CPU, 2400.0, "2 usable cores ÷ 0.83 ms"))
    assert result.pipeline_only is not None
    slower = dataclasses.replace(result.pipeline_only, examples_per_sec=100.0)
    html = render_profile_html(
        conclude(dataclasses.replace(result, limit=limit, pipeline_only=slower))
    )

    assert "Limit: 2,400 examples/s, bound by cpu." in html
    assert "The host&#39;s cores bound it." in html
    assert "<code>map(parse)</code>, the limiting stage, is defined at demo.py:12." in html
    assert "End to end ran 33% faster than the pipeline alone" in html


def test_a_limit_below_the_input_alone_says_why_in_the_terminal_html_and_json():
    from tfperf.report._text import render_summary
    from tfperf.results import Limit, LimitBound, LimitTerm, ProfileResult

    result = with_stages(fake_profile())
    term = LimitTerm(LimitBound.COMPUTE, 1000.0, "the model alone")
    limit = Limit(1000.0, LimitBound.COMPUTE, "The model binds.", [term])
    limit = dataclasses.replace(
        limit, input_alone_examples_per_sec=6_072.0, input_alone_by="pipeline only"
    )
    shown = dataclasses.replace(result, limit=limit)
    said = "the input alone ran faster, 6,072 examples/s (pipeline only), which is no contradiction"

    assert f"Limit: 1,000 examples/s, bound by compute; {said}" in render_summary(shown)
    assert said in render_profile_html(shown)
    saved = ProfileResult.from_json(shown.to_json())
    assert saved.limit is not None and saved.limit.input_alone_examples_per_sec == 6_072.0
    assert saved.limit.bound_words == limit.bound_words
