"""The generated family with known truth (tests/generated.py), profiled for real.

Each member is written as a pipeline file and profiled with the stage analysis; its figures
are checked against what its set costs make true:

- verdict: the one the member's 4x margin between input and model rates gives;
- limiting stage: the decode map, for the input-bound members;
- limit >= 0.95 x the best training rate measured (end to end, and weighed by the epoch);
- restart attribution: the stage a restart waits for, for the finite members, or "cannot
  tell" when the restarts were too few or too spread; never a stage below a `cache()`;
- stages measured: those the member's budget must reach (its costly decode);
- memory by buffer: each buffer's bytes within 25% of the truth.

    python -m benchmarks.generated [--smoke] [--only NAME] [--json PATH]

It prints one line per member and check, and exits 1 when a check failed. Run it on a quiet
machine: the suite checks the rules that need no clock (tests/test_generated.py).
`python -m benchmarks` (`make bench`) runs it too and writes its section of RESULTS.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from benchmarks.generated_record import KnownTruthCheck as Check
from tests.generated import Generated, Verdict, by_name, family
from tfperf.frameworks.tensorflow import profile_pipeline
from tfperf.pipeline import load_pipeline
from tfperf.results import ProfileResult
from tfperf.results.findings import Level
from tfperf.results.stages import StageStat

#: The limit may sit this far below a measured rate before the check fails (noise).
LIMIT_SLACK = 0.95
#: Memory by buffer must be within this share of the truth.
MEMORY_TOLERANCE = 0.25


def check_member(
    member: Generated, steps: int, budget_s: float, keep: Path | None = None
) -> list[Check]:
    """Profiles `member` and checks its figures against its truth; with `keep`, its profile
    is saved there as `<member>.json`, so a miss can be read again (`tfperf report`)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"{member.name}.py"
        path.write_text(member.source(), encoding="utf-8")
        result = profile_pipeline(
            load_pipeline(path),
            steps=steps,
            analyse_stages=True,
            budget_s=member.budget_s if member.budget_s is not None else budget_s,
        )
    if keep is not None:
        result.save(keep / f"{member.name}.json")
    return _checks(member, result)


def _checks(member: Generated, result: ProfileResult) -> list[Check]:
    truth = member.truth()
    checks = [_check(member, "verdict", truth.verdict.value, result.verdict.value)]
    if truth.verdict is Verdict.INPUT_BOUND:
        found = result.stages.bottleneck if result.stages is not None else None
        checks.append(
            _check(member, "limiting stage", truth.limiting_stage, found.label if found else None)
        )
    if result.limit is not None:
        rates = [result.end_to_end.examples_per_sec]
        if result.restarts is not None:
            rates.append(result.restarts.weighted_examples_per_sec)
        best = max(rates)
        limit = result.limit.examples_per_sec
        checks.append(
            Check(
                member.name,
                "limit >= best measured",
                f">= {LIMIT_SLACK * best:,.0f}",
                f"{limit:,.0f}",
                limit >= LIMIT_SLACK * best,
            )
        )
    if result.restarts is not None and not member.infinite:
        checks.append(_restart_check(member, result))
    unmeasured = set(result.stages.unmeasured) if result.stages is not None else set()
    for label in truth.measured:
        stages = result.stages.stages if result.stages is not None else []
        found = next((s for s in stages if s.label == label), None)
        measured = found is not None and found.index not in unmeasured
        checks.append(
            Check(
                member.name, f"measured {label}", "measured", _measured(found, unmeasured), measured
            )
        )
    holds = {h.stage: h.bytes for h in result.memory.holds} if result.memory else {}
    for label, expected in truth.holds.items():
        found_bytes = holds.get(label)
        passed = found_bytes is not None and abs(found_bytes - expected) <= (
            MEMORY_TOLERANCE * expected
        )
        checks.append(
            Check(
                member.name,
                f"memory of {label}",
                f"{expected:,.0f} B",
                f"{found_bytes:,.0f} B" if found_bytes is not None else "none",
                passed,
            )
        )
    return checks + _advice_checks(member, result)


def _advice_checks(member: Generated, result: ProfileResult) -> list[Check]:
    """Every finding's preconditions hold on the member: no "batch first" for a map that runs
    on batches, "cast after batching" only where a map casts, no file names to shuffle in a
    pipeline that reads none, no share above the whole, and no "cannot tell" beside a named
    answer to the same question."""
    truth = member.truth()
    said = [finding.sentence for finding in result.findings]
    checks = []
    for label in truth.batched_maps:
        wrong = [s for s in said if label in s and "batch first" in s]
        checks.append(_said(member, f"no 'batch first' for {label}", wrong))
    if not truth.casts:
        wrong = [s for s in said if "cast after batching" in s]
        checks.append(_said(member, "no cast advice without a cast", wrong))
    wrong = [s for s in said if "file names" in s or "list_files" in s]
    checks.append(_said(member, "no file names to shuffle (it reads none)", wrong))
    wrong = [s for s in said if any(float(p) > 100 for p in _SHARES.findall(s))]
    checks.append(_said(member, "no share above 100%", wrong))
    unsure = {f.topic for f in result.findings if f.level is Level.CAUTION and f.topic}
    wrong = [
        f.sentence for f in result.findings if f.topic in unsure and f.level is not Level.CAUTION
    ]
    checks.append(_said(member, "no 'cannot tell' beside an answer", wrong))
    return checks


#: A share a finding states, "58% of the 4 GiB peak".
_SHARES = re.compile(r"(\d+(?:\.\d+)?)% of")


def _said(member: Generated, what: str, wrong: Sequence[str]) -> Check:
    return Check(
        member.name, what, "never said", wrong[0][:80] if wrong else "never said", not wrong
    )


def _restart_check(member: Generated, result: ProfileResult) -> Check:
    """The stage a restart waits for: the truth's, or "cannot tell" from thin evidence; never
    a stage the truth rules out (below a cache)."""
    truth, cost = member.truth(), result.restarts
    assert cost is not None
    never = f"not {', '.join(truth.restart_never)}" if truth.restart_never else "any"
    expected = truth.restart_stage or never
    if not cost.evidence_enough:
        found = f"cannot tell ({cost.evidence.value})"
        return Check(member.name, "restart attribution", expected, found, cost.stage is None)
    if cost.stage in truth.restart_never:
        return Check(member.name, "restart attribution", expected, str(cost.stage), False)
    if truth.restart_stage is None:
        return Check(member.name, "restart attribution", expected, str(cost.stage), True)
    return _check(member, "restart attribution", truth.restart_stage, cost.stage)


def _measured(found: StageStat | None, unmeasured: set[int]) -> str:
    if found is None:
        return "no such stage"
    return "unmeasured" if found.index in unmeasured else "measured"


def _check(member: Generated, name: str, expected: str | None, found: str | None) -> Check:
    return Check(member.name, name, str(expected), str(found), expected == found)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.generated")
    parser.add_argument("--smoke", action="store_true", help="one member, short windows")
    parser.add_argument("--only", action="append", help="profile only this member")
    parser.add_argument("--json", type=Path, help="also write the checks as JSON here")
    parser.add_argument("--results", type=Path, help="save each member's profile JSON here")
    args = parser.parse_args(argv)
    members = [by_name(name) for name in args.only] if args.only else family()
    if args.smoke:
        members = members[:1]
    steps, budget = (10, 30.0) if args.smoke else (40, 120.0)
    checks = [
        check for member in members for check in check_member(member, steps, budget, args.results)
    ]
    for check in checks:
        mark = "ok  " if check.passed else "FAIL"
        print(
            f"{mark} {check.member:<16} {check.name:<28} expected {check.expected}, "
            f"found {check.found}"
        )
    if args.json is not None:
        args.json.write_text(
            json.dumps([dataclasses.asdict(c) for c in checks], indent=2) + "\n", "utf-8"
        )
    failed = sum(not check.passed for check in checks)
    print(f"{len(checks) - failed} of {len(checks)} checks passed on {len(members)} pipelines")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
