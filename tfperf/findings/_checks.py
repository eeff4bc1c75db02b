"""The consistency check run before anything is printed: named invariants over one result.

Each invariant states what two figures or two sentences must never say together. Figure
checks (`FIGURE_CHECKS`) run before the rules and replace a figure that contradicts the
others by the weaker statement that holds; sentence checks (`SENTENCE_CHECKS`) run on the
findings the rules made and drop one that contradicts the figures or another finding. Every
violation is kept as a `Conflict` in the result, so the JSON says what was corrected and why.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence

from tfperf.findings._facts import PipelineFacts
from tfperf.findings._rules import CAUTION_WEIGHT, demand, supply
from tfperf.results import RATE_NOISE, ProfileResult, Verdict
from tfperf.results.findings import Conflict, Evidence, Finding, Level

#: A figure check: the result, corrected, with what it corrected and what it says instead.
FigureCheck = Callable[[ProfileResult], tuple[ProfileResult, list[Conflict], list[Finding]]]
#: A sentence check: the findings kept, and a conflict for each one dropped.
SentenceCheck = Callable[[list[Finding], PipelineFacts], tuple[list[Finding], list[Conflict]]]

#: Words by which a finding says a stage runs on one thread.
_ONE_THREAD = ("one thread", "one call at a time", "single core", "single thread")
_SHARE = re.compile(r"(\d[\d,]*(?:\.\d+)?)% of")


def verdict_follows_rates(
    result: ProfileResult,
) -> tuple[ProfileResult, list[Conflict], list[Finding]]:
    """The verdict agrees with the phases' rates, both ways.

    Input alone slower than the model beyond the noise means steps wait at least
    `1 - supply / demand` of the time, whatever the wait between restarts says; a ceiling
    within the noise of end to end means input costs at most `1 - 1 / speedup`.
    """
    wait = result.input_wait_fraction
    alone, needed = supply(result), demand(result)
    speedup = result.speedup_if_input_free
    bound = wait
    if alone and needed and alone < (1 - RATE_NOISE) * needed:
        bound = max(wait, 1 - alone / needed)
    elif speedup is not None and speedup <= 1 + RATE_NOISE:
        bound = min(wait, max(0.0, 1 - 1 / speedup))
    verdict = Verdict.of(bound)
    if verdict is result.verdict:
        return result, [], []
    conflict = Conflict(
        "verdict-follows-rates",
        f"the wait share {wait:.1%} ({result.verdict.value}) beside input alone "
        f"{alone or 0:,.0f} and the model {needed or 0:,.0f} examples/s",
        f"{verdict.value}: the wait share the rates imply, {bound:.1%}",
    )
    fixed = dataclasses.replace(result, verdict=verdict, input_wait_fraction=bound)
    return fixed, [conflict], []


def limit_holds(result: ProfileResult) -> tuple[ProfileResult, list[Conflict], list[Finding]]:
    """The stated limit is at least every training rate measured (within the noise)."""
    limit = result.limit
    measured = result.end_to_end.examples_per_sec
    if limit is None or limit.examples_per_sec >= (1 - RATE_NOISE) * measured:
        return result, [], []
    conflict = Conflict(
        "limit-holds",
        f"a limit of {limit.examples_per_sec:,.0f} examples/s below the {measured:,.0f} "
        "measured end to end",
        "no limit",
    )
    caution = Finding(
        "limit-unknown",
        Level.CAUTION,
        f"tfperf's model of this pipeline gave {limit.examples_per_sec:,.0f} examples/s, below "
        f"the {measured:,.0f} measured end to end: it states no limit.",
        "Profile again with more --steps on a quieter machine.",
        Evidence("end_to_end", result.end_to_end.steps),
        topic="limit",
        weight=CAUTION_WEIGHT,
    )
    return dataclasses.replace(result, limit=None), [conflict], [caution]


def cannot_tell_alone(
    findings: list[Finding], facts: PipelineFacts
) -> tuple[list[Finding], list[Conflict]]:
    """ "Cannot tell" never stands beside a named answer to the same question."""
    unsure = {f.topic for f in findings if f.level is Level.CAUTION and f.topic}

    def wrong(finding: Finding) -> bool:
        return finding.topic in unsure and finding.level is not Level.CAUTION

    return _without(findings, wrong, "cannot-tell-alone", "tfperf cannot tell")


def threads_agree(
    findings: list[Finding], facts: PipelineFacts
) -> tuple[list[Finding], list[Conflict]]:
    """A stage said to run on one thread is not one AUTOTUNE was read to run on several."""
    parallel = [s.label for s in facts.stages if facts.autotuned.get(s.index, 1) > 1]

    def wrong(finding: Finding) -> bool:
        said = finding.sentence
        return any(label in said for label in parallel) and any(w in said for w in _ONE_THREAD)

    return _without(findings, wrong, "threads-agree", "AUTOTUNE's read-out")


def shares_at_most_whole(
    findings: list[Finding], facts: PipelineFacts
) -> tuple[list[Finding], list[Conflict]]:
    """No finding states a share above 100%."""

    def wrong(finding: Finding) -> bool:
        shares = [float(m.replace(",", "")) for m in _SHARE.findall(finding.sentence)]
        return any(share > 100 for share in shares)

    return _without(findings, wrong, "shares-at-most-whole", "nothing")


def _without(
    findings: list[Finding], wrong: Callable[[Finding], bool], invariant: str, instead: str
) -> tuple[list[Finding], list[Conflict]]:
    """The findings that are not `wrong`, and a conflict naming each one that is."""
    found = [f for f in findings if wrong(f)]
    conflicts = [Conflict(invariant, f"{f.rule}: {f.sentence}", instead) for f in found]
    return [f for f in findings if f not in found], conflicts


#: Run on the figures, before the rules.
FIGURE_CHECKS: tuple[FigureCheck, ...] = (verdict_follows_rates, limit_holds)
#: Run on the findings, after the rules.
SENTENCE_CHECKS: tuple[SentenceCheck, ...] = (
    cannot_tell_alone,
    threads_agree,
    shares_at_most_whole,
)


def check_figures(result: ProfileResult) -> tuple[ProfileResult, list[Conflict], list[Finding]]:
    """`result` with every figure check applied in turn."""
    conflicts: list[Conflict] = []
    added: list[Finding] = []
    for check in FIGURE_CHECKS:
        result, found, more = check(result)
        conflicts += found
        added += more
    return result, conflicts, added


def check_sentences(
    findings: Sequence[Finding], facts: PipelineFacts
) -> tuple[list[Finding], list[Conflict]]:
    """The findings that pass every sentence check, and a conflict for each one dropped."""
    kept, conflicts = list(findings), []
    for check in SENTENCE_CHECKS:
        kept, found = check(kept, facts)
        conflicts += found
    return kept, conflicts
