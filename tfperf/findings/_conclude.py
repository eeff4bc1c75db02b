"""The findings of one profile: figure checks, the rules, sentence checks, in that order."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from tfperf.findings._checks import check_figures, check_sentences
from tfperf.findings._facts import PipelineFacts
from tfperf.findings._rules import RULES
from tfperf.results import ProfileResult
from tfperf.results.findings import Conflict, Finding, Level
from tfperf.results.stages import StageStat


def conclude(result: ProfileResult, framework: Sequence[Finding] = ()) -> ProfileResult:
    """`result` with its findings made and checked, and its figures made consistent.

    Args:
        framework: findings in the framework's own words; without them, those already on
            `result` from a framework are kept.
    """
    own = list(framework) or [f for f in result.findings if f.origin != "tfperf"]
    result, conflicts, added = check_figures(result)
    facts = PipelineFacts.of(result)
    taken = {finding.rule for finding in own} | {f.topic for f in own if f.topic}
    made = [f for rule in RULES for f in rule(result, facts) if not {f.rule, f.topic} & taken]
    findings, dropped = check_sentences([*made, *own, *added], facts)
    findings.sort(key=lambda finding: -finding.weight)
    stages = result.stages
    if stages is not None:
        named = next((f for f in findings if f.rule == "limiting-stage"), None)
        stages = dataclasses.replace(stages, advice=named.sentence if named else "")
    return dataclasses.replace(
        result,
        findings=findings,
        conflicts=_unique([*result.conflicts, *conflicts, *dropped]),
        advice=" ".join(finding.sentence for finding in findings),
        stages=stages,
    )


def answer(result: ProfileResult, count: int = 3) -> list[Finding]:
    """The findings the short answer prints: the heaviest `count`, fixes and cautions first."""
    ranked = sorted(result.findings, key=lambda f: (f.level is Level.NOTE, -f.weight))
    return ranked[:count]


def named_limiting(result: ProfileResult) -> StageStat | None:
    """The limiting stage where a `limiting-stage` fix names it; None beside a "cannot tell",
    for a pipeline that keeps up, or for a stage a cache() serves after the first epoch."""
    named = any(f.rule == "limiting-stage" and f.level is Level.FIX for f in result.findings)
    return result.stages.limiting if named and result.stages is not None else None


def _unique(conflicts: Sequence[Conflict]) -> list[Conflict]:
    return list(dict.fromkeys(conflicts))
