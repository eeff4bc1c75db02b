"""GPU memory advice in the terminal summary, the HTML report and the JSON, from a GPU measured
through the NVML probe on the fake NVML (tests/fakes/fake_nvml.py)."""

from __future__ import annotations

import json

import pytest

from tests.fakes.gpu_profile import FITS, MIB, measured_on_fake_gpu
from tests.reports import fake_profile
from tfperf.report import render_profile_html, render_summary
from tfperf.report._gpu_memory import HEADING
from tfperf.results import ProfileResult
from tfperf.results._gpu_memory import PeakSource


@pytest.fixture(autouse=True)
def _no_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_terminal_summary_gives_the_limit_the_count_and_the_code() -> None:
    text = render_summary(measured_on_fake_gpu())

    section = text[text.index(HEADING) :].split("\n\n")[0]
    assert "this process's peak as NVML saw it was 4.32 GiB" in section
    assert "a memory_limit of 4864 MiB" in section
    assert FITS in section
    code = "\n".join(line.strip() for line in section.splitlines() if line.startswith("    "))
    assert "LogicalDeviceConfiguration(memory_limit=4864)" in code
    compile(code, "<advice>", "exec")


def test_html_report_has_a_gpu_memory_card_with_copyable_code() -> None:
    html = render_profile_html(measured_on_fake_gpu())

    card = html[html.index("<h2>GPU memory per process</h2>") :].split("</section>")[0]
    assert FITS in card
    assert "a memory_limit of 4864 MiB" in card
    assert 'data-copy="profile-throughput-gpu-0-code"' in card
    assert '<pre id="profile-throughput-gpu-0-code"><code>' in card
    assert "tf.config.LogicalDeviceConfiguration(memory_limit=4864)" in card


def test_json_carries_the_advice_and_loading_derives_it_again() -> None:
    result = measured_on_fake_gpu()
    data = json.loads(result.to_json())

    [advice] = data["gpu_memory_advice"]
    assert advice["gpu_name"] == "NVIDIA H100 80GB HBM3"
    assert advice["source"] == PeakSource.NVML_PROCESS.value
    assert advice["peak_bytes"] == 4426 * MIB
    assert (advice["memory_limit_mib"], advice["processes_per_gpu"]) == (4864, 14)
    assert advice["fits"] == FITS
    assert "memory_limit=4864" in advice["code"]
    assert ProfileResult.from_json(result.to_json()).gpu_memory_advice() == (
        result.gpu_memory_advice()
    )


def test_nothing_is_shown_when_no_gpu_was_measured() -> None:
    result = fake_profile()
    assert result.gpus == []

    assert HEADING not in render_summary(result)
    assert "GPU memory per process" not in render_profile_html(result)
    assert json.loads(result.to_json())["gpu_memory_advice"] == []


def test_a_recommended_growth_setting_is_spelled_out_to_apply() -> None:
    from tests.report.helpers import measured
    from tfperf.knobs import Knobs
    from tfperf.report._snippets import tf_data_snippet
    from tfperf.report._study_summary import applied_edits

    snippet = tf_data_snippet(Knobs(gpu_memory_growth=False).to_dict())
    best = measured("trial 3", [900.0], gpu_memory_growth=False)
    baseline = measured("baseline", [800.0])

    assert snippet.endswith(
        'for gpu in tf.config.list_physical_devices("GPU"):  # before TensorFlow uses the GPU\n'
        "    tf.config.experimental.set_memory_growth(gpu, False)"
    )
    assert "set_memory_growth" not in tf_data_snippet(Knobs().to_dict())
    assert applied_edits(best, baseline) == [
        "Add tf.config.experimental.set_memory_growth(gpu, False) for each GPU in "
        'tf.config.list_physical_devices("GPU"), before TensorFlow first uses it.'
    ]


def test_the_study_report_advises_on_the_recommended_configuration() -> None:
    from tests.reports import make_study
    from tfperf.report import render_study_html
    from tfperf.report._study_data import snapshot_study

    study = make_study(best_result=measured_on_fake_gpu())
    html = render_study_html(snapshot_study(study, "memory"))

    card = html[html.index("<h2>GPU memory per process</h2>") :].split("</section>")[0]
    assert FITS in card
    assert '<pre id="best-throughput-gpu-0-code">' in card


def test_a_torch_profile_is_told_in_torch_words_with_its_copy() -> None:
    import dataclasses

    from tfperf.results.stages import LoaderReport

    fake = measured_on_fake_gpu()
    gpu = dataclasses.replace(fake.gpus[0], torch_allocator_peak_bytes=2 * 1024 * MIB)
    loader = LoaderReport(
        workers=2,
        persistent_workers=False,
        copy_bytes_per_batch=64 * MIB,
        copy_s_per_batch=0.012,
        pinned_copy_s_per_batch=0.0025,
    )
    knobs = {**fake.knobs, "pin_memory": False}
    result = dataclasses.replace(fake, gpus=[gpu], loader=loader, knobs=knobs)

    text = render_summary(result)
    assert "PyTorch allocator peak 2 GiB" in text
    assert "Host-to-GPU copy of one batch (64 MiB): 12 ms from pageable memory" in text
    assert "set pin_memory=True" in text
    assert "torch.cuda.set_per_process_memory_fraction(0.04, device=0)" in text
    assert "tf.config" not in text and "TensorFlow first uses" not in text
    html = render_profile_html(result)
    assert "PyTorch allocator peak" in html and "Host-to-GPU copy of one batch" in html
    card = html[html.index("<h2>GPU memory per process</h2>") :].split("</section>")[0]
    assert "set_per_process_memory_fraction" in card and "tf.config" not in card
