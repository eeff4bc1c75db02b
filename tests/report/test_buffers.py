"""Host memory by buffer in the terminal, the JSON and the HTML: the same figures in each."""

from __future__ import annotations

import dataclasses

from tests.reports import fake_profile
from tfperf.findings import conclude
from tfperf.report import render_profile_html, render_summary
from tfperf.results import ProfileResult
from tfperf.results.stages import BufferHold, BufferKind, SizeSource, memory_account

KIB, MIB = 2**10, 2**20


def _shuffled_images() -> ProfileResult:
    shuffle = BufferHold(
        "shuffle(1024)",
        BufferKind.SHUFFLE,
        None,
        1024,
        192.0 * KIB,
        SizeSource.MEASURED,
        enlarged_by="map(decode)",
        bytes_before=12.0 * KIB,
    )
    prefetch = BufferHold("prefetch(2)", BufferKind.PREFETCH, None, 2, 6.0 * MIB, SizeSource.SPEC)
    account = memory_account([shuffle, prefetch], peak_rss_bytes=400 * MIB, ram_budget_bytes=None)
    return conclude(dataclasses.replace(fake_profile(), memory=account))


def test_the_account_sums_the_holds_and_advises_the_largest():
    account = _shuffled_images().memory
    assert account is not None
    assert account.total_bytes == 204 * MIB
    assert account.share_of_peak == 204 / 400
    assert account.advice == [
        "shuffle(1024) holds 192 MiB (1,024 elements of 192 KiB) of map(decode)'s output: "
        "shuffle the file names or the records before decoding (move the shuffle before "
        "map(decode)), and the buffer holds 12 MiB of its input instead."
    ]


def test_an_over_budget_cache_and_autotuned_buffers_get_their_advice():
    cache = BufferHold("cache", BufferKind.CACHE, None, 10_000, 96.0 * KIB, SizeSource.SPEC)
    tuned = BufferHold(
        "prefetch(AUTOTUNE)",
        BufferKind.PREFETCH,
        None,
        8,
        24.0 * MIB,
        SizeSource.SPEC,
        note="AUTOTUNE settled on 8",
        cast_by="map(to_float)",
    )
    advice = memory_account([cache, tuned], None, ram_budget_bytes=512 * MIB).advice
    assert advice[0].startswith("cache holds 938 MiB (10,000 elements of 96 KiB), more than")
    assert "cache before the expensive stage only when what it holds there fits" in advice[0]
    assert "cast after batching" in advice[1]
    assert "options.autotune.ram_budget" in advice[2]


def test_terminal_json_and_html_show_the_same_account():
    result = _shuffled_images()
    text = render_summary(result)
    assert "Host memory by buffer: the pipeline's buffers hold up to 204 MiB, 51% of the" in text
    assert "shuffle(1024)  1,024 x 192 KiB = 192 MiB (size from the first elements)" in text
    loaded = ProfileResult.from_dict(result.to_dict())
    assert loaded.memory == result.memory
    html = render_profile_html(result)
    assert "Host memory by buffer" in html
    assert '<td class="num">192 MiB</td>' in html
    assert "shuffle the file names or the records before decoding" in html
