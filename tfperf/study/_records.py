"""What tfperf stores on each trial of a study: one typed record, read and written here only.

Every trial user attribute is a field of `TrialRecord`, named as stored, and absent when it
does not apply (`None`, or `False` for `lost`):

- `knobs`: the knobs measured, stored as `Knobs.to_dict()`.
- `status`, `reason`: how it ended (a `TrialStatus` value; `interrupted` after Ctrl-C or when
  its tuner died; on trials outside the search, their role) and why ("" when complete).
- `peak_rss_bytes`, `peak_gpu_bytes`, `wall_s`: what it cost.
- `result`: on success, the full `ProfileResult` as JSON, so reports need no re-run.
- `reference`: `baseline` or `autotune`, on the two references.
- `duplicate_of`: the earlier trial whose figures it copies (the sampler proposed its knobs).
- `worker`: who ran it, a flat dict: `host`, `pid`, `started` (Unix time), `pid_scope`, and
  the hardware fields of `tfperf.hardware.HARDWARE_FIELDS`.
- `lost`: true when its tuner died (SIGKILL, power loss) and another tuner failed it. Lost
  trials do not count toward `--trials`; `retry_of` marks the trial that runs them again.
- `role`: only on trials that are not part of the search (`TrialRole`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from enum import Enum
from typing import TYPE_CHECKING, Any

from tfperf.errors import KnobError
from tfperf.knobs import Knobs
from tfperf.results import ProfileResult, TrialOutcome, TrialStatus

if TYPE_CHECKING:
    import optuna


class TrialRole(str, Enum):
    """Why a trial is not part of the search; search trials have no role."""

    LOCK = "remeasure"  # the lock of a final re-measurement (see `tfperf.study._cluster`)
    DUPLICATE = "duplicate"  # a second copy of a reference, never run


LOCK_ROLE, DUPLICATE_ROLE = TrialRole.LOCK, TrialRole.DUPLICATE


@dataclasses.dataclass(frozen=True)
class TrialRecord:
    """A trial's tfperf attributes; each field is one stored user attribute of that name.

    A record may be partial: writing one sets only the attributes it has, so a tuner writes
    what it knows when it knows it (the knobs when it claims a trial, the outcome at its end).
    """

    knobs: Knobs | None = None
    status: TrialStatus | None = None
    reason: str | None = None
    peak_rss_bytes: int | None = None
    peak_gpu_bytes: int | None = None
    wall_s: float | None = None
    result: str | None = None  # the `ProfileResult` as JSON
    reference: str | None = None
    duplicate_of: int | None = None
    worker: Mapping[str, Any] | None = None
    lost: bool = False
    retry_of: int | None = None
    role: TrialRole | None = None

    @classmethod
    def from_trial(cls, trial: optuna.trial.FrozenTrial) -> TrialRecord:
        """The record of a stored trial; values this tfperf cannot read are left out."""
        return cls.from_user_attrs(trial.user_attrs, source=f"trial {trial.number}")

    @classmethod
    def from_user_attrs(cls, attrs: Mapping[str, Any], *, source: str = "trial") -> TrialRecord:
        values = {field.name: attrs[field.name] for field in _FIELDS if field.name in attrs}
        values["knobs"] = _knobs(attrs.get("knobs"), source)
        values["status"] = _enum(TrialStatus, attrs.get("status"))
        values["role"] = _enum(TrialRole, attrs.get("role"))
        values["lost"] = bool(attrs.get("lost"))
        if values.get("worker") is not None:
            values["worker"] = dict(values["worker"])
        return cls(**values)

    @classmethod
    def of_outcome(cls, outcome: TrialOutcome) -> TrialRecord:
        """What a measured trial stores about its end: status, reason, costs and result."""
        result = outcome.result.to_json(indent=None) if outcome.result is not None else None
        return cls(
            status=outcome.status,
            reason=outcome.reason,
            peak_rss_bytes=outcome.peak_rss_bytes,
            peak_gpu_bytes=outcome.peak_gpu_bytes,
            wall_s=round(outcome.wall_s, 3),
            result=result,
        )

    def to_user_attrs(self) -> dict[str, Any]:
        """The attributes to store: plain JSON values, without fields that do not apply."""
        attrs: dict[str, Any] = {}
        for field in _FIELDS:
            value = getattr(self, field.name)
            if value is None or value is False:
                continue
            if isinstance(value, Knobs):
                value = value.to_dict()
            elif isinstance(value, Enum):
                value = value.value
            elif isinstance(value, Mapping):
                value = dict(value)
            attrs[field.name] = value
        return attrs

    def figures(self) -> TrialRecord:
        """Only what a measurement found (status, reason, peaks, result), for a copy of it."""
        return TrialRecord(
            status=self.status,
            reason=self.reason,
            peak_rss_bytes=self.peak_rss_bytes,
            peak_gpu_bytes=self.peak_gpu_bytes,
            result=self.result,
        )

    @property
    def searched(self) -> bool:
        """Whether the trial is part of the search (not a lock, not an unrun copy)."""
        return self.role is None

    @property
    def complete(self) -> bool:
        return self.status is TrialStatus.COMPLETE

    @property
    def host(self) -> str | None:
        return None if self.worker is None else self.worker.get("host")

    def profile(self) -> ProfileResult | None:
        """The stored `ProfileResult`, or None when the trial did not complete."""
        return ProfileResult.from_json(self.result) if self.result else None


_FIELDS = dataclasses.fields(TrialRecord)


def _knobs(stored: Any, source: str) -> Knobs | None:
    if not isinstance(stored, Mapping):
        return None
    try:
        return Knobs.from_mapping(stored, source=source)
    except KnobError:  # a study from a tfperf with other knobs: its other figures still read
        return None


def _enum(kind: type[Any], value: Any) -> Any:
    try:
        return None if value is None else kind(value)
    except ValueError:
        return None
