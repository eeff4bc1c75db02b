"""The short answer a profile prints by default: the verdict, the rates, the limit and the
heaviest findings, each with its fix and evidence; `--verbose` prints everything instead.

Every sentence here is a finding's (`ProfileResult.findings`) or a figure's: the terminal,
the HTML page and the JSON say the same thing.
"""

from __future__ import annotations

from tfperf.findings import answer
from tfperf.report._kept import kept_words
from tfperf.report._scaling import scaling_answer
from tfperf.report._utilisation import emulated_note, utilisation_words
from tfperf.results import ProfileResult, Verdict
from tfperf.results.findings import Evidence, Finding, Level

#: Findings the short answer lists; the rest are one flag away.
ANSWER_FINDINGS = 3
#: Non-empty lines the short answer keeps to.
ANSWER_LINES = 20

HEADLINES = {
    Verdict.HIGHLY_INPUT_BOUND: "HIGHLY INPUT-BOUND: the model waits for data",
    Verdict.MODERATELY_INPUT_BOUND: "MODERATELY INPUT-BOUND: the model sometimes waits for data",
    Verdict.COMPUTE_BOUND: "COMPUTE-BOUND: the input pipeline keeps up",
}

_MARKS = {Level.FIX: "fix", Level.CAUTION: "caution", Level.NOTE: "note"}
_PHASES = {
    "end_to_end": "end to end",
    "pipeline_only": "pipeline only",
    "compute_only": "compute only",
    "stages": "the stage analysis",
    "memory": "the buffer account",
    "code": "the script's code",
}


def render_answer(result: ProfileResult) -> str:
    """The default terminal answer, about 15 non-empty lines.

    Example:
        >>> print(render_answer(ProfileResult.load("reports/p-profile.json")))  # doctest: +SKIP
        Verdict: HIGHLY INPUT-BOUND: the model waits for data (71% of each step waits).
    """
    lines = [
        f"Verdict: {HEADLINES[result.verdict]} ({result.input_wait_fraction:.1%} of each step "
        "waits for input)."
    ]
    if result.speedup_if_input_free is not None and result.speedup_if_input_free >= 1.05:
        lines.append(
            f"  If input were free, training would run {result.speedup_if_input_free:.2f}x as fast."
        )
    lines.append("Throughput (examples/s, steady state):")
    for label, phase in (
        ("end to end", result.end_to_end),
        ("pipeline only", result.pipeline_only),
        ("compute only", result.compute_only),
    ):
        if phase is not None:
            lines.append(f"  {label:<14} {phase.examples_per_sec:>12,.1f}")
    if result.limit is not None:
        lines.append(
            f"Limit: {result.limit.examples_per_sec:,.0f} examples/s, {result.limit.bound_words}."
        )
    lines += _utilisation(result)
    if result.scaling is not None:  # asked for with --scaling: its answer, the table is --verbose's
        lines += ["Scaling with replicas (--scaling):", f"  {scaling_answer(result.scaling)}"]
    # The findings take what the figures above leave of ANSWER_LINES (a header, two lines
    # each, the closing line).
    room = max(1, (ANSWER_LINES - len(lines) - 2) // 2)
    shown = answer(result, min(ANSWER_FINDINGS, room))
    if shown:
        count = len(result.findings)
        lines.append(f"Findings ({len(shown)} of {count}):" if count > len(shown) else "Findings:")
        for number, finding in enumerate(shown, 1):
            lines += finding_lines(finding, f"  {number}. ")
    lines.append(_more(result, len(shown)))
    if kept := kept_words(result.pipeline, result.files_put_back, result.files_created):
        lines.append(kept)
    return "\n".join(lines)


def finding_lines(finding: Finding, head: str) -> list[str]:
    """A finding in two lines: its statement, then its fix and evidence."""
    pad = " " * len(head)
    second = f"{finding.fix} " if finding.fix else ""
    return [
        f"{head}[{_MARKS[finding.level]}] {finding.text}",
        f"{pad}{second}({evidence_words(finding.evidence)})",
    ]


def evidence_words(evidence: Evidence) -> str:
    """What a finding rests on, in words: `end to end, 100 steps; step p50 36 ms`."""
    where = _PHASES.get(evidence.phase or "", evidence.phase or "the pipeline's graph")
    parts = [f"from {where}"]
    if evidence.samples is not None:
        unit = evidence.unit if evidence.samples != 1 else evidence.unit.rstrip("s")
        parts.append(f"{evidence.samples:,} {unit}")
    if evidence.spread:
        parts.append(evidence.spread)
    return "; ".join(parts)


def _utilisation(result: ProfileResult) -> list[str]:
    """With an emulated or predicted step: that the step was emulated, the measured step's
    utilisation and the verdict against the bar (the rest is in --verbose)."""
    note = emulated_note(result)
    words = utilisation_words(result)
    lines = [note] if note else []
    if words is not None:
        lines += [f"{words.title}:", *(f"  {p}" for p in words.points[:1]), f"  {words.verdict}"]
    return lines


def _more(result: ProfileResult, shown: int) -> str:
    rest = len(result.findings) - shown
    more = f" and the other {rest} finding{'s' * (rest != 1)}" if rest > 0 else ""
    return f"More: --verbose prints every figure{more}; the HTML report holds them all."
