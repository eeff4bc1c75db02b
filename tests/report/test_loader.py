"""A DataLoader's block: the same figures in the same words in the terminal and the HTML."""

from __future__ import annotations

import dataclasses
import html as html_module
import re

from tests.reports import fake_profile, make_study
from tfperf.report import render_profile_html, render_study_html
from tfperf.report._loader import loader_text, loader_view
from tfperf.report._study_data import snapshot_study
from tfperf.report._text import render_summary
from tfperf.results import ProfileResult
from tfperf.results.stages import LoaderReport

LOADER = LoaderReport(
    workers=3,
    persistent_workers=False,
    first_batch_s=0.412,
    item_function="SlowReads.__getitem__",
    item_where="pipeline.py:29",
    wall_s_per_item=0.00285,
    cpu_s_per_item=0.000114,
    collate_wall_s_per_batch=0.0000883,
    workers_estimate=12,
    host_ram_peak_bytes=337 * 2**20,
    workers_ram_peak_bytes=21 * 2**20,
)


def _torch_profile(loader: LoaderReport = LOADER) -> ProfileResult:
    return dataclasses.replace(fake_profile("pipeline.py"), loader=loader)


def _html_rows(page: str, section_id: str) -> tuple[str, dict[str, str]]:
    """The heading and the (label, words) rows of the block with `section_id`."""
    block = re.search(rf'id="{section_id}">(.*?)</section>', page, flags=re.S)
    assert block is not None, f"no block {section_id}"
    heading = re.search(r"<h2>(.*?)</h2>", block.group(1))
    assert heading is not None
    rows = re.findall(r"<tr><th>(.*?)</th><td>(.*?)</td></tr>", block.group(1))
    unescape = html_module.unescape
    return unescape(heading.group(1)), {unescape(k): unescape(v) for k, v in rows}


def _terminal_rows(text: str) -> tuple[str, dict[str, str]]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("DataLoader: "))
    rows: dict[str, str] = {}
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        label, _, words = line.strip().partition(": ")
        rows[label] = words
    return lines[start], rows


def test_the_html_block_says_the_terminals_figures_in_its_words():
    result = _torch_profile()
    html_heading, html_rows = _html_rows(render_profile_html(result), "profile-throughput-loader")
    text_heading, text_rows = _terminal_rows(render_summary(result))

    assert html_heading == text_heading == "DataLoader: 3 workers, started at each epoch"
    assert html_rows == text_rows
    assert list(text_rows) == [
        "first batch",
        "items",
        "collate",
        "workers estimate",
        "host RAM of trainer and workers",
    ]
    assert text_rows["first batch"] == (
        "412 ms after a fresh pass starts, workers started: paid again at each epoch "
        "(no persistent_workers)"
    )
    assert text_rows["items"] == (
        "2.85 ms wall, 0.114 ms CPU each in SlowReads.__getitem__ (pipeline.py:29): mostly "
        "waiting (a blocking read), so workers beyond the cores help"
    )
    assert text_rows["workers estimate"].startswith("about 12 workers: more add no speed here")
    assert (
        "peak 337 MiB, the workers' own pages 21 MiB"
        in text_rows["host RAM of trainer and workers"]
    )


def test_rows_follow_what_was_measured_and_how_items_spend_their_time():
    computing = dataclasses.replace(LOADER, cpu_s_per_item=0.0027, persistent_workers=True)
    rows = dict(loader_view(computing).rows)
    assert rows["items"].endswith(
        "mostly computing, so workers beyond the cores only queue for them"
    )
    assert rows["first batch"].endswith("paid once, the workers are kept")
    bare = LoaderReport(workers=0, persistent_workers=False)
    assert loader_view(bare).rows == ()
    assert loader_text(loader_view(bare)) == "DataLoader: 0 workers (in the trainer)"


def test_a_torch_study_says_dataloader_where_a_tf_data_one_says_tf_data():
    page = render_study_html(snapshot_study(make_study(best_result=_torch_profile()), "demo"))
    heading, rows = _html_rows(page, "best-throughput-loader")
    assert heading == "DataLoader: 3 workers, started at each epoch" and "items" in rows
    assert "Or in DataLoader code that does not read" in page
    assert "tf.data code" not in page
