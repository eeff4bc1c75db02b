"""The terminal summary of a `ProfileResult`: verdict first, then throughputs, memory, advice."""

from __future__ import annotations

from tfperf.findings import DISTURBED_BELOW, named_limiting
from tfperf.knobs import format_value
from tfperf.report._answer import HEADLINES, finding_lines
from tfperf.report._buffers import buffers_text
from tfperf.report._distribution import distribution_text
from tfperf.report._gpu_memory import gpu_memory_text
from tfperf.report._kept import kept_words
from tfperf.report._loader import loader_text, loader_view
from tfperf.report._profile_charts import UNREADABLE_PREFIX, autotune_note, slowdown_reason
from tfperf.report._scaling import render_scaling
from tfperf.report._utilisation import utilisation_text
from tfperf.report._words import knob_value
from tfperf.results import Environment, PhaseResult, ProfileResult
from tfperf.results.stages import (
    EPOCH_SOURCE_WORDS,
    AutotuneReadout,
    BatchShape,
    DatasetOptions,
    LoaderReport,
    RestartCost,
    StageReport,
    StageStat,
    StageUnit,
)
from tfperf.units import format_bytes, format_seconds


def render_summary(result: ProfileResult) -> str:
    """Everything a profile measured and found, for the terminal (`--verbose`)."""
    sections = [
        _verdict(result),
        _throughput(result),
        utilisation_text(result),
        distribution_text(result),
        _restarts(result.restarts, result.loader is not None) if result.restarts else "",
        _batch_shapes(result.batch_shapes),
        _stages(result, result.stages) if result.stages is not None else "",
        _loader(result.loader) if result.loader is not None else "",
        _limit_line(result),
        _warmup(result),
        _budget(result),
        _memory(result),
        buffers_text(result.memory) if result.memory is not None else "",
        gpu_memory_text(result),
        _autotune(result, result.autotune) if result.autotune is not None else "",
        _scaling(result),
        findings_text(result),
        kept_words(result.pipeline, result.files_put_back, result.files_created),
        _configuration(result),
    ]
    return "\n\n".join(section for section in sections if section)


def _scaling(result: ProfileResult) -> str:
    if result.scaling is None:
        return ""
    return render_scaling(result.scaling, result.environment.cpu_count)


def _effective(name: str, value: object, options: DatasetOptions | None) -> str:
    """A knob's value, or the one the built dataset carries when the pipeline set it itself."""
    carried = options.carried(name) if options is not None else None
    if value is None and carried is not None:
        return f"{format_value(carried)} (set by the pipeline)"
    return knob_value(value, name)


def _verdict(result: ProfileResult) -> str:
    lines = [
        f"Verdict: {HEADLINES[result.verdict]}.",
        f"  Steps spend {result.input_wait_fraction:.1%} of their time waiting for input "
        f"(TensorBoard's scale: >= 20% highly, 5-20% moderately input-bound).",
    ]
    if result.speedup_if_input_free is not None:
        lines.append(_ceiling(result.speedup_if_input_free))
    if result.compute_slowdown is not None and (slowdown := _slowdown(result)):
        lines.append(slowdown)
    return "\n".join(lines)


def _slowdown(result: ProfileResult) -> str:
    slowdown = result.compute_slowdown
    if slowdown is None or slowdown < DISTURBED_BELOW:
        return ""  # the compute-only phase was disturbed: a finding says so
    why = slowdown_reason(result)
    why = f" ({why})" if why else ""
    return f"  An example computes {slowdown:.2f}x as long end to end as on cached batches{why}."


#: Below this compute-only ceiling, input costs (next to) nothing: "1.02x as fast" reads as noise.
_NO_GAIN_BELOW = 1.05


def _ceiling(speedup: float) -> str:
    if speedup < _NO_GAIN_BELOW:
        return (
            "  Input costs training nothing measurable: the model alone on cached batches runs "
            f"no faster ({speedup:.2f}x the end-to-end rate); compute bounds it."
        )
    return (
        f"  If input were free, training would run {speedup:.2f}x as fast (the compute-only "
        "ceiling)."
    )


def _restarts(cost: RestartCost, loader: bool) -> str:
    times = f"{cost.restarts} time{'s' * (cost.restarts != 1)}"
    what = "the DataLoader's pass" if loader else "the finite dataset"
    steady = f"Wait share between restarts {cost.steady_wait_fraction:.1%}"
    if not cost.cost_told:
        return (
            f"Restarts: {what} restarted {times} in the window ({cost.window_wait_share:.0%} "
            "of the window's wait), too few or too scattered to tell what one costs (see the "
            f"findings).\n  {steady}."
        )
    return (
        f"Restarts: {what} restarted {times} in the window, each costing "
        f"{format_seconds(cost.seconds_per_restart)}{cost.waiting_on} "
        f"({cost.window_wait_share:.0%} of the window's wait).\n  {steady}; with one restart "
        f"per real epoch of {cost.epoch_steps:,} steps ({EPOCH_SOURCE_WORDS[cost.epoch_source]}) "
        f"{cost.weighted_wait_fraction:.1%}."
    )


def _batch_shapes(shapes: list[BatchShape]) -> str:
    if len(shapes) < 2:
        return ""
    same = len({shape.examples for shape in shapes}) == 1  # the shapes differ elsewhere
    listed = ", ".join(
        f"{shape.shape if same else f'{shape.examples} examples'} x{shape.steps}"
        for shape in shapes[:6]
    )
    more = f" and {len(shapes) - 6} more" if len(shapes) > 6 else ""
    return (
        f"Batches came in {len(shapes)} shapes ({listed}{more}); compute only replays them in "
        "the same proportions, and every rate is per example."
    )


def _throughput(result: ProfileResult) -> str:
    rows = [("end to end", result.end_to_end)]
    if result.pipeline_only is not None:
        rows.append(("pipeline only", result.pipeline_only))
    if result.compute_only is not None:
        rows.append(("compute only", result.compute_only))
    lines = ["Throughput, steady state (examples/s):"]
    for label, phase in rows:
        lines.append(f"  {label:<14} {phase.examples_per_sec:>12,.1f}   {_phase_detail(phase)}")
    return "\n".join(lines)


def _phase_detail(phase: PhaseResult) -> str:
    times = phase.step_time
    return (
        f"{phase.steps_per_sec:,.1f} steps/s; step p50 {format_seconds(times.p50_s)}, "
        f"p90 {format_seconds(times.p90_s)}, p99 {format_seconds(times.p99_s)} "
        f"over {phase.steps} steps"
    )


_CONSUMES = "the model consumes (compute only)"


def _stages(result: ProfileResult, report: StageReport) -> str:
    lines = [
        f"Stages (the pipeline cut after each one, run alone for {report.seconds_per_stage:g} s "
        f"each; {report.duration_s:.1f} s in all):"
    ]
    if report.stages:
        width = max(len(_CONSUMES), *(len(stage.label) for stage in report.stages))
        lines.append(
            f"  {'#':>2}  {'stage':<{width}}  {'examples/s':>12}  {'CPU ms/example':>14}  "
            f"{'adds ms/example':>15}"
        )
        limiting = named_limiting(result)
        lines.extend(_stage_row(stage, report, limiting, width) for stage in report.stages)
        if report.consumption_examples_per_sec is not None:
            lines.append(
                f"  {'':>2}  {_CONSUMES:<{width}}  {report.consumption_examples_per_sec:>12,.1f}"
            )
    if report.note:
        lines.append(f"  Note: {report.note}")
    return "\n".join(lines)


def _stage_row(
    stage: StageStat, report: StageReport, limiting: StageStat | None, width: int
) -> str:
    head = f"  {stage.index:>2}  {stage.label:<{width}}  "
    if stage.examples_per_sec is None:
        if stage.unit is StageUnit.INPUT and stage.elements_per_sec is not None:
            return (
                head
                + f"{stage.elements_per_sec:>12,.1f}  (inputs/s: its elements are not examples)"
            )
        return head + (stage.note or "not measured")
    row = (
        head
        + f"{stage.examples_per_sec:>12,.1f}  {_ms(stage.cpu_s_per_example):>14}  "
        + f"{_ms(stage.added_s_per_example):>15}"
    )
    marks = []
    if stage.index == report.bottleneck_index:
        named = "limiting stage" if limiting is not None else "costliest stage"
        marks.append(named + (f", {stage.location}" if stage.location else ""))
    if stage.index == report.falls_short_index:
        marks.append("first below the model's rate")
    return row + (f"   <- {'; '.join(marks)}" if marks else "")


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.3f}"


def _autotune(result: ProfileResult, readout: AutotuneReadout) -> str:
    reason = readout.unavailable_reason
    if reason is not None:
        # A reason tfperf words itself reads as is; an unexpected error gets a plain sentence.
        if not reason.startswith(UNREADABLE_PREFIX) and result.distribution is None:
            return f"AUTOTUNE's choices: not read ({reason})."
        return f"AUTOTUNE's choices: {autotune_note(result)}"
    if not readout.choices:
        return ""
    chosen = "; ".join(
        f"{choice.stage_label} {choice.argument or choice.parameter}={choice.value}"
        + ("" if choice.tuned else " (fixed at start)")
        for choice in readout.choices
    )
    return f"AUTOTUNE chose (end of the end-to-end phase): {chosen}."


def _warmup(result: ProfileResult) -> str:
    warm = result.end_to_end.warmup
    line = (
        f"Warm-up (excluded from the figures): first batch after "
        f"{format_seconds(warm.time_to_first_batch_s)}; {warm.steps} warm-up steps took "
        f"{format_seconds(warm.duration_s)}"
    )
    if not warm.converged:
        line += " (step times had not settled: figures may include drift; try more --warmup)"
    epochs = result.end_to_end.epochs_crossed
    if epochs:
        line += f".\n  The dataset ran out and restarted {epochs} time{'s' * (epochs != 1)}"
    return line + "."


def _memory(result: ProfileResult) -> str:
    lines = []
    if result.host_memory is not None:
        memory = result.host_memory
        lines.append(
            f"Host RAM: peak {format_bytes(memory.peak_rss_bytes)}, mean "
            f"{format_bytes(memory.mean_rss_bytes)} (this process and its children); machine "
            f"{format_bytes(memory.total_bytes)}, {format_bytes(memory.available_bytes)} available."
        )
    if result.cpu is not None:
        lines.append(
            f"CPU: {result.cpu.mean_percent:.0f}% mean, {result.cpu.peak_percent:.0f}% peak "
            f"(100% = one core; {result.cpu.cpu_count} cores)."
        )
    for gpu in result.gpus:
        lines.append(
            f"GPU {gpu.index} {gpu.name}: memory peak {format_bytes(gpu.memory_used_peak_bytes)} "
            f"of {format_bytes(gpu.memory_total_bytes)}"
            + (
                f", TensorFlow allocator peak {format_bytes(gpu.tf_allocator_peak_bytes)}"
                if gpu.tf_allocator_peak_bytes is not None
                else ""
            )
            + (
                f", PyTorch allocator peak {format_bytes(gpu.torch_allocator_peak_bytes)}"
                if gpu.torch_allocator_peak_bytes is not None
                else ""
            )
            + (
                f", utilisation {gpu.utilization_mean_percent:.0f}% mean."
                if gpu.utilization_mean_percent is not None
                else "."
            )
        )
    if not result.gpus:
        lines.append(f"GPU: none measured ({result.gpu_unavailable_reason or 'no GPU'}).")
    copy = result.host_copy()
    if copy is not None:
        lines.append(copy.describe())
    return "\n".join(lines)


def _configuration(result: ProfileResult) -> str:
    knobs = " ".join(
        f"{name}={_effective(name, value, result.dataset_options)}"
        for name, value in result.knobs.items()
    )
    env = result.environment
    return (
        f"Configuration: {knobs}\n"
        f"Environment: tfperf {env.tfperf_version}, {_frameworks(env)}, "
        f"Python {env.python_version}, {env.cpu_count} CPUs ({env.cpu_model})"
    )


def _limit_line(result: ProfileResult) -> str:
    """The limit from the pipeline model (issue 12): the rate no configuration can exceed."""
    limit = result.limit
    if limit is None:
        return ""
    return (
        f"Limit: {limit.examples_per_sec:,.0f} examples/s, {limit.bound_words}.\n"
        f"  {limit.explanation}"
    )


def _budget(result: ProfileResult) -> str:
    """The time budget the measurement was sized to, and the phases it cut short."""
    if not result.budget_s:
        return ""
    cut = [phase for phase in result.phases() if phase.cut_by_budget]
    line = (
        f"Budget: measured within {result.budget_s:g} s (--budget; start-up not counted): "
        "each phase may take a quarter of it, the stage analysis a fifth."
    )
    if cut:
        names = ", ".join(f"{p.phase.value.replace('_', ' ')} after {p.steps} steps" for p in cut)
        line += (
            f"\n  The budget ended {names}, before the steps asked for: the window was sized "
            "by the measured step time. A larger --budget measures more steps."
        )
    return line


def _loader(loader: LoaderReport) -> str:
    """A DataLoader's workers, items and collate, and its host RAM with shared pages once."""
    return loader_text(loader_view(loader))


def findings_text(result: ProfileResult) -> str:
    """Every finding with its fix, evidence and the facts it checked; then any conflict."""
    if not result.findings:
        return ""
    lines = ["Findings:"]
    for number, finding in enumerate(result.findings, 1):
        lines += finding_lines(finding, f"  {number}. ")
        lines += [f"     checked: {fact}" for fact in finding.relies_on]
    for conflict in result.conflicts:
        lines.append(
            f"  Corrected ({conflict.invariant}): {conflict.found}; printed {conflict.printed}."
        )
    return "\n".join(lines)


def _frameworks(env: Environment) -> str:
    """The framework versions the run had: TensorFlow's, and torch's where it was imported."""
    found = [f"TensorFlow {env.tensorflow_version or 'n/a'}"]
    if env.torch_version:
        found.append(f"torch {env.torch_version}")
    return ", ".join(found)
