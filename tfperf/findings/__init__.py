"""What tfperf says about a profile: findings made by named rules, checked before printing.

`conclude(result)` runs the figure checks (`_checks.FIGURE_CHECKS`), then every rule of
`_rules.RULES` over the result and its pipeline's facts, then the sentence checks, and returns the
result with its `findings` (heaviest first), its `conflicts`, and `advice` (the findings as
one paragraph, for readers of older JSON). It is pure and idempotent: a saved result can be
concluded again on any machine, without TensorFlow. A framework passes findings in its own
words (`origin` set to its name); they replace the neutral findings of the same rule or
topic.

Example:
    >>> result = conclude(ProfileResult.load("reports/p-profile.json"))  # doctest: +SKIP
    >>> [finding.rule for finding in result.findings]  # doctest: +SKIP
    ['limiting-stage', 'input-slower-than-model', 'memory']
"""

from __future__ import annotations

from tfperf.findings._conclude import answer, conclude, named_limiting
from tfperf.findings._facts import PARALLEL_ARGUMENT
from tfperf.findings._frozen import TRAINING_HAZARD_WEIGHT
from tfperf.findings._rules import CONTENTION_AT, DISTURBED_BELOW, INPUT_RATES

__all__ = [
    "CONTENTION_AT",
    "DISTURBED_BELOW",
    "INPUT_RATES",
    "PARALLEL_ARGUMENT",
    "TRAINING_HAZARD_WEIGHT",
    "answer",
    "conclude",
    "named_limiting",
]
