"""The known-truth family in `python -m benchmarks`: its checks as records, how they are
measured (`benchmarks.generated` in a child, with its own TensorFlow) and their section.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from benchmarks.child import json_rows

__all__ = ["KnownTruthCheck", "known_truth_section", "run_known_truth"]

#: How long the whole family may take (about 15 minutes on 2 quiet cores).
TIMEOUT_S = 3600.0


@dataclasses.dataclass
class KnownTruthCheck:
    """One check of one member: what its set costs make true, what the profile found, and
    whether they agree."""

    member: str
    name: str
    expected: str
    found: str
    passed: bool


def run_known_truth(log: Callable[[str], None]) -> list[KnownTruthCheck]:
    """Runs `python -m benchmarks.generated` in a child and reads its checks.

    A member whose checks fail makes the child exit 1: its checks are still the answer.

    Raises:
        RuntimeError: the child wrote no checks; the message carries the end of its output.
    """
    log("known-truth family (python -m benchmarks.generated)")
    rows = json_rows(
        "benchmarks.generated", "the known-truth family", failure_has_rows=True, timeout_s=TIMEOUT_S
    )
    return [KnownTruthCheck(**row) for row in rows]


def known_truth_section(checks: Sequence[KnownTruthCheck]) -> str:
    """The report's section: each member's checks passed, then every miss in full."""
    if not checks:
        return ""
    members: dict[str, list[KnownTruthCheck]] = {}
    for check in checks:
        members.setdefault(check.member, []).append(check)
    passed = sum(check.passed for check in checks)
    lines = [
        "## Known-truth family",
        "",
        "`python -m benchmarks.generated`: each generated pipeline (tests/generated.py), "
        "whose stage costs are set, profiled with the stage analysis, and its figures checked "
        "against what those costs make true: the verdict, the limiting stage, a limit at or "
        "above 0.95 of the best rate measured, the stage a restart waits for, the stages the "
        "budget must reach, memory by buffer within 25%, and findings whose preconditions "
        f"hold. {passed} of {len(checks)} checks passed on {_pipelines(len(members))}.",
        "",
        "| pipeline | checks passed | missed |",
        "| --- | ---: | --- |",
    ]
    for member, own in members.items():
        missed = ", ".join(check.name for check in own if not check.passed) or "none"
        lines.append(f"| {member} | {sum(c.passed for c in own)} of {len(own)} | {missed} |")
    misses = [check for check in checks if not check.passed]
    if misses:
        lines += ["", "Each miss:", ""]
        lines += [
            f"- **{c.member}**, {c.name}: expected {c.expected}, found {c.found}" for c in misses
        ]
    return "\n".join(lines)


def _pipelines(count: int) -> str:
    return f"{count} pipeline{'' if count == 1 else 's'}"
