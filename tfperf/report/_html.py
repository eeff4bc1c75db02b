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

import datetime
import functools
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfperf.knobs import format_value
from tfperf.report import _profile_charts as pc
from tfperf.report import _study_charts as sc
from tfperf.units import format_bytes, format_seconds

if TYPE_CHECKING:
    import jinja2
    import plotly.graph_objects as go

    from tfperf.report._study_data import StudySnapshot
    from tfperf.results import ProfileResult

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

    def add(self, chart_id: str, figure: go.Figure) -> str:
        self.figures[chart_id] = figure
        return chart_id

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


def render_study_html(snapshot: StudySnapshot) -> str:
    """The study report: the recommendation, the search, every trial, the best profile."""
    charts = Charts()
    hosts = sc.host_groups(snapshot)
    context: dict[str, Any] = {
        "title": f"tfperf study: {snapshot.study_name}",
        "snapshot": snapshot,
        "summary": sc.summary(snapshot),
        "status_counts": _status_counts(snapshot),
        "hosts": hosts,
        "mixed_hardware": sc.mixed_hardware(hosts),
        "knob_names": _knob_columns(snapshot),
        "importances": sc.importances(snapshot),
        "profile": None,
    }
    history = sc.history(snapshot)
    if history.numbers:
        context["history_chart"] = charts.add("history", sc.history_figure(history))
        context["ram_chart"] = charts.add("ram", sc.ram_figure(sc.ram_tradeoff(snapshot)))
    if context["importances"].names:
        context["importance_chart"] = charts.add(
            "importances", sc.importance_figure(context["importances"])
        )
    view = sc.parallel_view(snapshot)
    if view.axes and len(view.examples_per_sec) > 1:
        context["parallel_chart"] = charts.add("parallel", sc.parallel_figure(view))
    if snapshot.best_result is not None:
        context["profile"] = profile_section(snapshot.best_result, charts, prefix="best")
    return _render("study.html.j2", charts, **context)


def profile_section(result: ProfileResult, charts: Charts, prefix: str) -> dict[str, Any]:
    """What the profile part of a page shows; its figures are added to `charts`."""
    section: dict[str, Any] = {
        "result": result,
        "banner": pc.verdict_banner(result),
        "throughput_chart": charts.add(
            f"{prefix}-throughput", pc.throughput_figure(pc.throughputs(result))
        ),
        "timeline_chart": charts.add(
            f"{prefix}-timeline", pc.timeline_figure(pc.step_timeline(result.end_to_end))
        ),
        "distribution_chart": charts.add(
            f"{prefix}-distribution",
            pc.distribution_figure(pc.step_distribution(result.end_to_end)),
        ),
        "memory": pc.memory_chart(result),
        "cpu": pc.cpu_chart(result),
    }
    section["memory_chart"] = charts.add(f"{prefix}-memory", pc.memory_figure(section["memory"]))
    waterfall = pc.stage_waterfall(result)
    if waterfall is not None and waterfall.labels:
        section["stages_chart"] = charts.add(f"{prefix}-stages", pc.waterfall_figure(waterfall))
    section["cpu_chart"] = charts.add(f"{prefix}-cpu", pc.cpu_figure(section["cpu"]))
    return section


def write_html(html: str, path: Path) -> Path:
    """Writes a report atomically (a reader never sees half a file); returns the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(html)
        # mkstemp creates the file private (0600); a report is as readable as any other file.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def _render(template: str, charts: Charts, **context: Any) -> str:
    from tfperf.hardware import package_version

    page = _environment().get_template(template)
    return page.render(
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
    )
    return environment


@functools.cache
def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    script: str = get_plotlyjs()
    return script


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
