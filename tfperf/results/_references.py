"""The references a study measures, and the one table of words every report names them by.

Every study measures the file's baseline and everything on AUTOTUNE; the pipeline model then
proposes configurations of its own (`tfperf.tuner._proposers`), each of one `Reference` kind.
The kind's value is the label stored on its trial and in the tune JSON; `REFERENCE_WORDS` holds
how the recommendation, the terminal summary and the HTML headline name it, so adding a kind
is one member here and one entry in that table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from enum import Enum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tfperf.results._limit import Estimate


class Reference(str, Enum):
    """What a reference trial measures; the value is its stored label."""

    BASELINE = "baseline"  # the file's `BASELINE`, as written
    AUTOTUNE = "autotune"  # every tunable knob on AUTOTUNE
    ESTIMATE = "estimate"  # the model's best configuration, training as written
    TRAINING = "estimate-training"  # the estimate under the training setting predicted fastest
    POOL = "estimate-pool"  # the last estimate on a private pool of the cores its input spends
    RUNNER_UP = "estimate-runner-up"  # the pooled shape under the next larger batch
    RULE = "rule"  # the framework's own rule of thumb (PyTorch's: num_workers = cores)

    @property
    def proposed(self) -> bool:
        """Whether the pipeline model proposed it (every kind but the fixed references)."""
        return self not in (Reference.BASELINE, Reference.AUTOTUNE, Reference.RULE)

    @property
    def words(self) -> ReferenceWords:
        return REFERENCE_WORDS[self]

    @staticmethod
    def is_proposal(label: str | None) -> bool:
        """Whether `label` names a configuration the pipeline model proposed.

        Example:
            >>> [Reference.is_proposal(x) for x in ("estimate-pool", "autotune", "trial 3")]
            [True, False, False]
        """
        try:
            return Reference(label).proposed
        except ValueError:
            return False


@dataclasses.dataclass(frozen=True)
class ReferenceWords:
    """How reports name one kind of reference.

    The summary and headline forms are templates filled from the estimate they name:
    `{names}` the training knobs it changes, `{settings}` them as `name=value`,
    `{setting_words}` as `name value`, `{cores}` its private pool ("4 cores").

    Attributes:
        name: in a sentence of the recommendation ("Use tfperf's estimate: ...").
        summary: before its figures in the terminal summary's limit block.
        headline: before its figures in the HTML report's estimate line.
    """

    name: str
    summary: str = ""
    headline: str = ""

    def summary_for(self, estimate: Estimate) -> str:
        """The summary form, filled from `estimate`."""
        return _filled(self.summary, estimate)

    def headline_for(self, estimate: Estimate) -> str:
        """The headline form, filled from `estimate`."""
        return _filled(self.headline, estimate)


def _filled(template: str, estimate: Estimate) -> str:
    # Plain values (the precision as its string) and call sites by name, as the words show them.
    knobs, changed = {**estimate.knobs.to_dict(), **estimate.knobs.sites}, estimate.changes_training
    pool = estimate.knobs.private_threadpool_size
    return template.format(
        names=", ".join(changed),
        settings=", ".join(f"{n}={knobs.get(n)}" for n in changed),
        setting_words=", ".join(f"{n} {knobs.get(n)}" for n in changed),
        cores=f"{pool} core" if pool == 1 else f"{pool} cores",
    )


REFERENCE_WORDS: dict[Reference, ReferenceWords] = {
    Reference.BASELINE: ReferenceWords("your baseline"),
    Reference.RULE: ReferenceWords("the framework's rule (PyTorch's: num_workers = cores)"),
    Reference.AUTOTUNE: ReferenceWords("the AUTOTUNE configuration"),
    Reference.ESTIMATE: ReferenceWords(
        "tfperf's estimate", summary="tfperf's estimate", headline="tfperf's estimate"
    ),
    Reference.TRAINING: ReferenceWords(
        "tfperf's estimate with training changed",
        summary="its estimate with training changed",
        headline="Its estimate with {names} changed",
    ),
    Reference.POOL: ReferenceWords(
        "tfperf's estimate on the cores its input spends",
        summary="its estimate on the cores its input spends",
        headline="The same with its input on a pool of {cores}",
    ),
    Reference.RUNNER_UP: ReferenceWords(
        "tfperf's estimate under the runner-up training setting",
        summary="its estimate under the runner-up setting ({settings})",
        headline=(
            "The runner-up setting ({setting_words}), which the model could not tell from the "
            "second's,"
        ),
    ),
}


def reference_name(label: str) -> str | None:
    """How a recommendation names the reference labelled `label`; None for any other label.

    Example:
        >>> reference_name("estimate-pool"), reference_name("trial 7")
        ("tfperf's estimate on the cores its input spends", None)
    """
    try:
        return Reference(label).words.name
    except ValueError:
        return None


#: Where records written before `Estimate.kind` kept each proposal: one field per kind.
_OLD_FIELDS = {
    "estimate": Reference.ESTIMATE,
    "training_estimate": Reference.TRAINING,
    "pool_estimate": Reference.POOL,
    "runner_up_estimate": Reference.RUNNER_UP,
}


def folded_estimates(data: Mapping[str, Any]) -> dict[str, Any]:
    """A stored record (a tune JSON, a study's guide) with the separate estimate fields of
    older tfperf folded into its `estimates` list, each marked with its kind.

    A record that already has `estimates` is returned as it is (as a new dict).

    Example:
        >>> old = {"estimate": {"knobs": {}, "predicted_examples_per_sec": 5.0},
        ...        "pool_estimate": None}
        >>> folded_estimates(old)["estimates"][0]["kind"]
        'estimate'
    """
    folded = dict(data)
    if "estimates" in folded:
        return folded
    estimates = []
    for field, kind in _OLD_FIELDS.items():
        stored = folded.pop(field, None)
        if isinstance(stored, Mapping):
            estimates.append({**stored, "kind": kind.value})
    folded["estimates"] = estimates
    return folded
