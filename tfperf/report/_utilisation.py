"""The accelerator's utilisation in words, for the terminal summary and the HTML report alike.

Both render `utilisation_words(result)`, so the figures and the verdict read the same
wherever they are shown.
"""

from __future__ import annotations

import dataclasses

from tfperf.results import ProfileResult
from tfperf.units import format_seconds


@dataclasses.dataclass(frozen=True)
class UtilisationWords:
    """What a report says about the accelerator's utilisation.

    Attributes:
        title: the heading, naming the bar.
        points: one sentence per step: the measured (or emulated) one, then a prediction.
        verdict: the shortest step the input keeps at the bar.
        caution: why the verdict is rough (the measurement does not bear the model out), or
            None.
    """

    title: str
    points: list[str]
    verdict: str
    caution: str | None


def utilisation_words(result: ProfileResult) -> UtilisationWords | None:
    """The words for `result.utilisation`; None when the profile holds none."""
    found = result.utilisation
    if found is None:
        return None
    bar = _percent(found.bar)
    measured = found.measured
    caution = None
    if not found.model_agrees:
        caution = (
            f"The measurement does not bear the model out at the measured step (it predicts a "
            f"{_percent(measured.model_wait_fraction)} wait, {_percent(measured.wait_fraction)} "
            "was measured): take the step above, and any prediction, as a rough guide."
        )
    return UtilisationWords(
        title=f"Accelerator utilisation (1 - wait), against MLPerf Storage's {bar} bar",
        points=[point.describe(found.bar) for point in found.points],
        verdict=(
            f"The input alone delivers a batch every {format_seconds(found.input_interval_s)}, "
            f"so it keeps a step of {format_seconds(found.min_step_s)} or longer at least "
            f"{bar} busy; a shorter step waits for input."
        ),
        caution=caution,
    )


def utilisation_text(result: ProfileResult) -> str:
    """The terminal section: whether the step was emulated, then the title and each sentence
    indented; empty for a profile of a real step that holds no utilisation."""
    note = emulated_note(result)
    words = utilisation_words(result)
    if words is None:
        return note
    lines = [*words.points, words.verdict, *([words.caution] if words.caution else [])]
    section = f"{words.title}:\n" + "\n".join(f"  {line}" for line in lines)
    return f"{note}\n{section}" if note else section


def emulated_note(result: ProfileResult) -> str:
    """Says that the compute was emulated; empty for a profile of a real step."""
    if result.emulated_step_s is None:
        return ""
    return (
        f"Compute emulated (--step-time): each step slept {format_seconds(result.emulated_step_s)} "
        "in place of the model, so the accelerator cost the host no CPU; no model ran."
    )


def _percent(fraction: float) -> str:
    return f"{fraction * 100:.0f}%"
