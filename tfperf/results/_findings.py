"""What tfperf says about a profile, as records: each statement with its evidence.

A profile's figures are measured; its sentences are findings made from them by small named
rules (`tfperf.findings`). Each finding carries the phase its figures came from, how many
samples they rest on and their spread, and the facts of the pipeline it checked before it was
made, so the terminal, the HTML page and the JSON say the same thing and a reader can see
why. A `Conflict` records where two figures disagreed and which weaker statement was printed
instead.

Example:
    >>> from tfperf.results.findings import Evidence, Finding, Level
    >>> Finding("prefetch-zero", Level.FIX, "prefetch is 0: input never overlaps compute.",
    ...         "Set prefetch to tf.data.AUTOTUNE.", Evidence("end_to_end", 100, None)).level.value
    'fix'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from enum import Enum


class Level(str, Enum):
    """What a finding asks of the reader."""

    FIX = "fix"  # a change to make: its `fix` says which
    CAUTION = "caution"  # figures beside it are disturbed or thin: read them with care
    NOTE = "note"  # a fact worth knowing, nothing to change


@dataclasses.dataclass(frozen=True)
class Evidence:
    """What a finding's figures rest on.

    Attributes:
        phase: where they were measured: `end_to_end`, `pipeline_only`, `compute_only`,
            `stages` (the stage analysis), `memory` (the buffer account), `code` (read from
            the script's code as it ran), or None for a fact of the pipeline's graph alone.
        samples: how many measurements (steps, restarts, stages) they rest on; None: one
            figure, or not countable.
        spread: their spread in words, e.g. `waits 5 ms to 18 ms`; None when not applicable.
        unit: what one sample is: `steps`, `stages`, `restarts`, `buffers`, `shapes`.
    """

    phase: str | None
    samples: int | None
    spread: str | None = None
    unit: str = "steps"


@dataclasses.dataclass(frozen=True)
class Finding:
    """One statement about a profile, made by one rule whose preconditions held.

    Attributes:
        rule: the name of the rule that made it, e.g. `limiting-stage` (stable: tests and JSON
            readers match on it).
        level: fix, caution or note.
        text: the statement with its figures, one or two sentences.
        fix: what to change, when there is something to change; None otherwise.
        evidence: the phase, samples and spread the figures rest on.
        relies_on: the facts of the pipeline the rule checked before it spoke, in words
            (e.g. `map(decode) runs on single elements`).
        topic: what question it answers (`limiting-stage`), where two findings may answer
            the same one: a caution that cannot tell silences a named answer on its topic.
        weight: the share of step time the finding speaks to, 0 to 1: the answer lists the
            heaviest first.
        origin: `tfperf` for the neutral rules, else the framework whose words it carries.
        hazard: it says training sees other data than the code as written would hand it (a
            change to what the model learns, not to its speed); a recommendation that brings
            one the baseline did not have says so (`introduced_hazards`).
    """

    rule: str
    level: Level
    text: str
    fix: str | None
    evidence: Evidence
    relies_on: tuple[str, ...] = ()
    topic: str | None = None
    weight: float = 0.0
    origin: str = "tfperf"
    hazard: bool = False

    @property
    def sentence(self) -> str:
        """The statement and its fix, as one paragraph."""
        return f"{self.text} {self.fix}" if self.fix else self.text


def introduced_hazards(after: Sequence[Finding], before: Sequence[Finding]) -> list[str]:
    """The hazards among `after` (a recommendation's findings) whose rule `before` (the
    baseline's) did not make, each as its sentence: what adopting it changes in training."""
    had = {finding.rule for finding in before if finding.hazard}
    return [f.sentence for f in after if f.hazard and f.rule not in had]


@dataclasses.dataclass(frozen=True)
class Conflict:
    """Two figures that disagreed, and the weaker statement printed instead.

    Attributes:
        invariant: the name of the check that failed, e.g. `verdict-follows-rates`.
        found: what the figures said, with their values.
        printed: what tfperf printed instead.
    """

    invariant: str
    found: str
    printed: str
