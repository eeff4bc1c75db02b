"""Text alternatives: every chart's sentence and data table come from the figure itself."""

from __future__ import annotations

from tests.reports import fake_profile
from tfperf.report import _profile_charts as pc
from tfperf.report import _step_charts as stc
from tfperf.report._alt import MAX_ROWS, text_alternative
from tfperf.report._html import code_spans


def test_a_bar_chart_reads_as_a_sentence_and_a_table():
    alt = text_alternative(pc.throughput_figure(pc.throughputs(fake_profile())))
    assert alt.sentence.startswith("Throughput: training end to end, the pipeline alone")
    assert "throughput: 3 points, from 133 to 400" in alt.sentence
    assert alt.columns == ("series", "examples per second", "value")
    assert [row[0] for row in alt.rows] == ["throughput"] * 3
    assert alt.omitted == 0


def test_a_long_series_lists_the_first_rows_and_counts_the_rest():
    result = fake_profile()
    records = result.end_to_end.records * 20
    alt = text_alternative(
        stc.timeline_figure(
            stc.step_timeline(
                result.end_to_end.__class__(**{**result.end_to_end.__dict__, "records": records})
            )
        )
    )
    assert len(alt.rows) == MAX_ROWS
    assert alt.omitted == 2 * len(records) - MAX_ROWS


def test_code_spans_become_code_and_the_rest_is_escaped():
    assert str(code_spans("run `tfperf tune` <now>")) == "run <code>tfperf tune</code> &lt;now&gt;"
