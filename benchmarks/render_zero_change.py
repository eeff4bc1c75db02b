"""The zero-change sections of RESULTS.md and their goal: pure functions of the record.

The section sets the plain-file twin's figures beside its contract file's: the tuned/baseline
gain tfperf claimed for the twin, the patched/original ratio of tfperf's verified hand-over,
and the patched/original ratio the benchmark measured itself, with the patch. The goal: the
patched file runs at the claimed gain, within the noise of both figures. The PyTorch
script's section sets its whole loop as written beside it as patched (`torch_script_section`).
"""

from __future__ import annotations

from benchmarks.goals import Check
from benchmarks.record import BenchRecord, Ratio, median, ratio
from benchmarks.render_model import table
from benchmarks.torch_script_record import TorchScript
from benchmarks.zero_change_record import RatioFigure, ZeroChange

GOAL = "patched/original within noise of the claimed gain"


def zero_change_section(record: BenchRecord) -> str:
    """The section; "" for a run without the zero-change row."""
    zero = record.zero_change
    if zero is None:
        return ""
    contract = next((p for p in record.pipelines if p.name == zero.contract), None)
    gain = ratio(contract.tuned.end_to_end, contract.baseline.end_to_end) if contract else None
    measured = ratio(zero.patched, zero.original)
    verified = _figure(zero.verified) if zero.verified else f"n/a: {zero.verify_problem}"
    rows = [
        [f"contract file `{zero.contract}.py`: tuned / baseline (measured here)", _ratio(gain)],
        [
            f"plain file `{zero.pipeline}`: tuned / baseline (claimed by tfperf tune)",
            _figure(zero.claimed),
        ],
        ["plain file: patched / original (tfperf's verified hand-over)", verified],
        ["plain file: patched / original (measured here)", _ratio(measured) + _rates(zero)],
    ]
    intro = (
        f"## Zero-change hand-over\n\nThe plain-file twin of {zero.contract} "
        f"(`benchmarks/zero_change/{zero.pipeline}`: the same data and costs, its values "
        "written in its tf.data calls, no knobs) tuned with `tfperf tune --write-patch` "
        f"({zero.trials} trials of {zero.steps} steps, verified hand-over on). The patch was "
        "applied with `patch -p0` to a copy, and the patched file measured against the "
        f"original side by side ({len(zero.original)} and {len(zero.patched)} interleaved "
        "runs, each in a fresh process, both as written: nothing of tfperf's passed in). "
        f"tfperf chose {zero.best_label}. A ratio's ± is the sum of its figures' spreads."
    )
    text = table(intro, ["", "ratio"], rows)
    if zero.problem:
        text += f"\n\nNo side-by-side measurement: {zero.problem}"
    if zero.diff:
        text += f"\n\nThe edits in the patch:\n\n```diff\n{zero.diff.rstrip()}\n```"
    if zero.manual_edits:
        text += "\n\nLeft to do by hand:\n\n" + "\n".join(f"- {e}" for e in zero.manual_edits)
    if zero.failures:
        text += "\n\nRuns that failed: " + "; ".join(zero.failures[:3])
    return text


def torch_script_section(found: TorchScript | None) -> str:
    """The report's section: original and patched side by side, and the goal."""
    if found is None:
        return ""
    measured = ratio(found.patched, found.original)
    shown = "n/a" if measured is None else f"{measured.value:.2f}x ± {measured.plus_minus:.2f}"
    met = "n/a" if measured is None else ("yes" if measured.value >= found.goal else "**no**")
    study = f"{found.trials} trials" if found.trials is not None else "no study (given sites)"
    lines = [
        "## Zero-change PyTorch script",
        "",
        "`python -m benchmarks.torch_script`: `benchmarks/zero_change/torch_train.py`, an "
        "ordinary training script (its own loop over a DataLoader of 2 ms blocking reads, "
        f"`num_workers=0` as written), tuned with `tfperf tune --write-patch` ({study}); the "
        "patch applied with `patch -p0` to a copy, then the original and the patched script "
        f"run as written, {found.rounds} interleaved runs each, each a fresh process clocking "
        "the script's whole loop (its workers' start-up included).",
        "",
        "| script | runs | median examples/s |",
        "| --- | ---: | ---: |",
        f"| original | {len(found.original)} | {median(found.original):,.0f} |",
        f"| patched | {len(found.patched)} | {median(found.patched):,.0f} |",
        "",
        f"Patched / original: {shown}; the goal: at least {found.goal:g}x; met: {met}.",
    ]
    if found.diff:
        lines += ["", f"The patch:\n\n```diff\n{found.diff.rstrip()}\n```"]
    return "\n".join(lines)


def check_torch_script(found: TorchScript) -> Check:
    """Whether the patched script's whole loop runs at least `goal` times the original's."""
    goal = f"script patched/original >= {found.goal:g}x"
    measured = ratio(found.patched, found.original)
    if measured is None:
        return Check(goal, None, "n/a", "no run of one of the scripts completed")
    return Check(goal, measured.value >= found.goal, _ratio(measured))


def check_zero_change(zero: ZeroChange) -> Check:
    """Whether the patched file runs at the gain tfperf claimed, within both figures' noise."""
    measured = ratio(zero.patched, zero.original)
    claimed = zero.claimed
    if measured is None or claimed is None:
        reason = zero.problem or "; ".join(zero.failures[:2]) or "no figure was recorded"
        return Check(GOAL, None, "n/a", reason)
    noise = measured.spread + claimed.spread
    shown = f"{measured.value:.2f}x vs claimed {claimed.ratio:.2f}x (noise ±{noise:.0%})"
    gap = measured.value / claimed.ratio - 1 if claimed.ratio > 0 else 0.0
    if abs(gap) <= noise:
        return Check(GOAL, True, shown)
    return Check(GOAL, False, shown, _miss_note(zero, gap))


def _miss_note(zero: ZeroChange, gap: float) -> str:
    if gap > 0:
        return (
            f"The patched file runs {gap:.0%} faster than tfperf claimed: the study's figures "
            "for its winner were lower than what a fresh process measures (more repeats, or "
            "--rounds, narrow that)."
        )
    by_hand = (
        f" tfperf left {len(zero.manual_edits)} edit(s) to do by hand, which the patched file "
        "lacks."
        if zero.manual_edits
        else ""
    )
    return (
        f"The patched file runs {-gap:.0%} below the gain tfperf claimed: the patch does not "
        f"hold all of what the winner measured.{by_hand} Compare the winner's knobs with the "
        "edits above."
    )


def _ratio(found: Ratio | None) -> str:
    if found is None:
        return "n/a"
    text = f"{found.value:.2f}x ± {found.spread:.0%}"
    return text if found.significant else f"{text} (noise)"


def _figure(found: RatioFigure | None) -> str:
    return "n/a" if found is None else _ratio(Ratio(found.ratio, found.spread))


def _rates(zero: ZeroChange) -> str:
    if not zero.original or not zero.patched:
        return ""
    return f" ({median(zero.original):,.0f} → {median(zero.patched):,.0f} examples/s)"
