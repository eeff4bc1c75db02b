"""Self-contained HTML reports: one file with plotly.js, the styles and every figure inlined.

The page is assembled by Jinja2 with autoescaping on, so pipeline names, knob values and error
text from user files are escaped wherever they appear. Figures travel as one JSON document in
a `<script type="application/json">` block (with `<`, `>` and `&` escaped so no text can close
the block) and are drawn by a small script; nothing is fetched from the network, so a report
opens offline, from a mail attachment or on an air-gapped cluster.

Example:
    >>> html = render_profile_html(ProfileResult.load("reports/p-profile.json"))  # doctest: +SKIP
    >>> write_html(html, Path("reports/p-profile.html"))  # doctest: +SKIP
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import functools
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfperf.knobs import format_value
from tfperf.report import _knob_charts as kc
from tfperf.report import _profile_charts as pc
from tfperf.report import _resource_charts as rc
from tfperf.report import _scaling as scaling
from tfperf.report import _step_charts as stc
from tfperf.report import _study_charts as sc
from tfperf.report import _study_headline as sh
from tfperf.report import _study_summary as ss
from tfperf.report._alt import TextAlternative, text_alternative
from tfperf.report._answer import evidence_words
from tfperf.report._buffers import buffer_rows, buffers_summary
from tfperf.report._distribution import distribution_rows
from tfperf.report._kept import kept_words
from tfperf.report._loader import loader_view
from tfperf.report._utilisation import emulated_note, utilisation_words
from tfperf.report._words import knob_value
from tfperf.results.discovery import describe_discovery
from tfperf.units import format_bytes, format_seconds

if TYPE_CHECKING:
    import jinja2
    import markupsafe
    import plotly.graph_objects as go

    from tfperf.report._study_data import StudySnapshot
    from tfperf.results import ProfileResult
    from tfperf.results.tune import TuneResult

_TEMPLATES = Path(__file__).parent / "templates"
MISSING = "\u2013"  # an en dash marks a figure a trial did not produce
# Escapes that keep JSON intact but stop it from closing a <script> element or breaking a line
# in older JavaScript parsers (U+2028 and U+2029).
_JSON_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


class Charts:
    """Figures of one page, by the id of the element each is drawn in."""

    def __init__(self) -> None:
        self.figures: dict[str, go.Figure] = {}
        self.alternatives: dict[str, TextAlternative] = {}

    def add(self, chart_id: str, figure: go.Figure) -> str:
        self.figures[chart_id] = figure
        self.alternatives[chart_id] = text_alternative(figure)
        return chart_id

    def element(self, chart_id: str, narrow_note: str | None = None) -> markupsafe.Markup:
        """The element a chart is drawn in, with its sentence and its data as a table."""
        import markupsafe

        alt = self.alternatives[chart_id]
        escape = markupsafe.escape
        head = "".join(f"<th>{escape(column)}</th>" for column in alt.columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>"
            for row in alt.rows
        )
        more = f'<p class="muted">and {alt.omitted} more rows</p>' if alt.omitted else ""
        narrow = f'<p class="narrow-only muted">{escape(narrow_note)}</p>' if narrow_note else ""
        return markupsafe.Markup(
            f'{narrow}<div class="chart{" wide-only" if narrow_note else ""}" '
            f'data-chart="{escape(chart_id)}" role="img" aria-label="{escape(alt.sentence)}">'
            f'</div><details class="chart-data"><summary>The chart\'s data as a table</summary>'
            f'<p>{escape(alt.sentence)}</p><div class="table-wrap"><table><thead><tr>{head}'
            f"</tr></thead><tbody>{body}</tbody></table></div>{more}</details>"
        )

    def to_json(self) -> str:
        """All figures as one JSON object, safe to place inside a `<script>` element."""
        import plotly.io

        parts = [
            f'"{chart_id}":{plotly.io.to_json(figure, validate=False, pretty=False)}'
            for chart_id, figure in self.figures.items()
        ]
        return _script_safe("{" + ",".join(parts) + "}")


def render_profile_html(result: ProfileResult) -> str:
    """The profile report of one `ProfileResult`, as a complete HTML document."""
    charts = Charts()
    return _render(
        "profile.html.j2",
        charts,
        title=f"tfperf profile: {Path(result.pipeline).name}",
        profile=profile_section(result, charts, prefix="profile"),
    )


def render_study_html(snapshot: StudySnapshot, tune: TuneResult | None = None) -> str:
    """The study report: the answer, the search, every trial, the recommendation's profile.

    `tune` is the `TuneResult` of the run that finished the study, when at hand: its limit,
    estimate and hand-over are shown; without it the page shows what the storage holds.
    """
    charts = Charts()
    hosts = sc.host_groups(snapshot)
    found = ss.summary(snapshot, tune)
    context: dict[str, Any] = {
        "title": f"tfperf study: {snapshot.study_name}",
        "snapshot": snapshot,
        "summary": found,
        "headline": sh.headline(snapshot, found, tune),
        "figures": ss.trial_figures(snapshot),
        "status_counts": _status_counts(snapshot),
        "hosts": hosts,
        "mixed_hardware": sc.mixed_hardware(hosts),
        "knob_names": _knob_columns(snapshot),
        "importances": kc.importances(snapshot),
        "pareto_explained": sc.PARETO_EXPLAINED,
        "profile": None,
        "kept": kept_words(snapshot.pipeline, snapshot.files_put_back, snapshot.files_created),
    }
    history = sc.history(snapshot)
    if history.points:
        context["history_chart"] = charts.add("history", sc.history_figure(history))
        context["ram_chart"] = charts.add("ram", sc.ram_figure(sc.ram_tradeoff(snapshot)))
    if context["importances"].names:
        context["importance_chart"] = charts.add(
            "importances", kc.importance_figure(context["importances"])
        )
    view = kc.parallel_view(snapshot)
    if view.axes and len(view.examples_per_sec) > 1:
        context["parallel_chart"] = charts.add("parallel", kc.parallel_figure(view))
    if snapshot.best_result is not None:
        context["profile"] = profile_section(
            snapshot.best_result, charts, prefix="best", in_tune=True
        )
    return _render("study.html.j2", charts, **context)


def profile_section(
    result: ProfileResult, charts: Charts, prefix: str, in_tune: bool = False
) -> dict[str, Any]:
    """What the profile part of a page shows; its figures are added to `charts`.

    `in_tune`: the page is a tune report, so advice does not send the reader to `tfperf tune`.
    """
    banner = pc.verdict_banner(result)
    if in_tune:
        findings = tuple(
            dataclasses.replace(f, fix=sh.without_tune_advice(f.fix)) if f.fix else f
            for f in banner.findings
        )
        banner = dataclasses.replace(
            banner, advice=sh.without_tune_advice(banner.advice), findings=findings
        )
    section: dict[str, Any] = {
        "result": result,
        "banner": banner,
        "autotuned": pc.autotuned(result),
        "autotune_note": pc.autotune_note(result),
        "slowdown_reason": pc.slowdown_reason(result),
        "throughput_chart": charts.add(
            f"{prefix}-throughput", pc.throughput_figure(pc.throughputs(result))
        ),
        "timeline_chart": charts.add(
            f"{prefix}-timeline",
            stc.timeline_figure(stc.step_timeline(result.end_to_end, result.cpu)),
        ),
        "distribution_chart": charts.add(
            f"{prefix}-distribution",
            stc.distribution_figure(stc.step_distribution(result.end_to_end)),
        ),
        "memory": rc.memory_chart(result),
        "cpu": rc.cpu_chart(result),
        "gpu_memory": result.gpu_memory_advice(),
        "buffers": buffer_rows(result.memory) if result.memory is not None else [],
        "buffers_summary": buffers_summary(result.memory) if result.memory is not None else "",
        "distribution": (
            distribution_rows(result.distribution) if result.distribution is not None else []
        ),
        "emulated": emulated_note(result),
        "loader": loader_view(result.loader) if result.loader is not None else None,
        "utilisation": utilisation_words(result),
        # A trial's own: on a study's page, the study's files are said once, above.
        "kept": (
            ""
            if in_tune
            else kept_words(result.pipeline, result.files_put_back, result.files_created)
        ),
    }
    section["memory_chart"] = charts.add(f"{prefix}-memory", rc.memory_figure(section["memory"]))
    waterfall = pc.stage_waterfall(result)
    if waterfall is not None and waterfall.labels:
        section["stages_chart"] = charts.add(f"{prefix}-stages", pc.waterfall_figure(waterfall))
    section["cpu_chart"] = charts.add(f"{prefix}-cpu", rc.cpu_figure(section["cpu"]))
    if result.scaling is not None:
        section["scaling"] = scaling.scaling_section(result.scaling, result.environment.cpu_count)
    if result.scaling is not None and result.scaling.points:
        chart = scaling.scaling_figure(scaling.scaling_chart(result.scaling))
        section["scaling_chart"] = charts.add(f"{prefix}-scaling", chart)
    return section


def write_html(html: str, path: Path) -> Path:
    """Writes a report atomically (a reader never sees half a file); returns the path.

    Through `tfperf.outputs.write_text`: a path that is not a regular file is refused.
    """
    from tfperf.outputs import write_text

    return write_text(path, html, "--html")


def _render(template: str, charts: Charts, **context: Any) -> str:
    from tfperf.hardware import package_version

    page = _environment().get_template(template)
    return page.render(
        chart=charts.element,
        charts_json=charts.to_json(),
        plotly_js=_plotly_js(),
        style=(_TEMPLATES / "report.css").read_text(encoding="utf-8"),
        script=(_TEMPLATES / "report.js").read_text(encoding="utf-8"),
        generated=datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        version=package_version("tfperf") or "unknown",
        **context,
    )


@functools.cache
def _environment() -> jinja2.Environment:
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    environment.filters.update(
        knob=format_value,
        bytes=lambda value: MISSING if value is None else format_bytes(value),
        seconds=lambda value: MISSING if value is None else format_seconds(value),
        rate=lambda value: MISSING if value is None else f"{value:,.0f}",
        percent=lambda value, digits=0: MISSING if value is None else f"{value:.{digits}%}",
        code_spans=code_spans,
        evidence=evidence_words,
        discovery_lines=lambda discovery: "\n".join(describe_discovery(discovery)),
        knob_value=knob_value,
        breakable=breakable,
    )
    return environment


#: plotly.js with only the traces tfperf draws (scatter, bar, histogram, parcoords), minified
#: and gzipped: see templates/plotly-entry.js and docs/notes/plotly-bundle.md for how it is built.
PLOTLY_BUNDLE = _TEMPLATES / "plotly.min.js.gz"


@functools.cache
def _plotly_js() -> str:
    """The bundle as base64: the page unpacks it with the browser's DecompressionStream."""
    return base64.b64encode(PLOTLY_BUNDLE.read_bytes()).decode("ascii")


_CODE_SPAN = re.compile(r"`([^`]+)`")
_NAME_PART = re.compile(r"(?<=[_./@:])")


def breakable(text: object) -> markupsafe.Markup:
    """`text` escaped, with a line-break opportunity after each `_ . / @ :`.

    Knob, call-site and host names are long words; a table column may wrap them at these
    joints instead of growing wider than the screen or breaking them at any letter.
    """
    import markupsafe

    parts = _NAME_PART.split(str(text))
    return markupsafe.Markup("<wbr>").join(markupsafe.escape(part) for part in parts)


def code_spans(text: str | None) -> markupsafe.Markup:
    """Text with its `backticked` spans as <code>, everything else escaped."""
    import markupsafe

    escaped = str(markupsafe.escape(text or ""))
    return markupsafe.Markup(_CODE_SPAN.sub(r"<code>\1</code>", escaped))


def _script_safe(text: str) -> str:
    for raw, escaped in _JSON_ESCAPES.items():
        text = text.replace(raw, escaped)
    return text


def _status_counts(snapshot: StudySnapshot) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in snapshot.trials:
        counts[row.status] = counts.get(row.status, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: -item[1]))


def _knob_columns(snapshot: StudySnapshot) -> list[str]:
    """Knobs whose values differ between trials: the table's other columns add nothing."""
    from tfperf.knobs import Knobs
    from tfperf.report._study_data import site_names

    return [
        name
        for name in (*Knobs.names(), *site_names(snapshot.trials))
        if len({repr(row.flat_knobs.get(name)) for row in snapshot.trials if row.knobs}) > 1
    ]


def default_profile_path(pipeline_name: str, reports_dir: Path = Path("reports")) -> Path:
    return reports_dir / f"{pipeline_name}-profile.html"


def default_study_path(study_name: str, reports_dir: Path = Path("reports")) -> Path:
    return reports_dir / f"{study_name}.html"
