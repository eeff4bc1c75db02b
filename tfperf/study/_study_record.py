"""What tfperf stores on a study itself (not on a trial): one typed record, read and written here.

Every study user attribute tfperf writes is a field of `StudyRecord`; the attribute names are
private to this module, so a reader outside `tfperf.study` never spells one:

- `pipeline` (`tfperf_pipeline`): the pipeline file's name; a study without it was not
  created by tfperf.
- `objective` (`tfperf_objective`): what the study optimises.
- `source` (`tfperf_source`): the SHA-256 of the pipeline's files when the study began
  (`tfperf.pipeline.source_digest`); a study written before it has none and takes the first
  tuner's.
- `references_enqueued` (`tfperf_references_enqueued`): true once the references are queued.
- `guide` (`tfperf_guide`): the pipeline model's guide (`tfperf.tuner._guide.Guide.to_dict()`),
  stored with the first proposal and replaced by the refit.
- `discovery`, `code_root` (`tfperf_discovery`, one attribute holding both): for a plain
  pipeline or a script, the call sites found in its code and the folder they are relative to.
- `remeasured` (`tfperf_remeasure`): the final re-measurement, one `Measurement` per
  configuration; `remeasured_by` (`tfperf_remeasured_by`) what it covers, written after it.
- `step_time_s` (`tfperf_step_time_s`): the emulated accelerator step every trial ran against
  (`--step-time`), in seconds; absent for a study of the pipeline's own step, as in every study
  written before it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tfperf.results import plain_dict, validated
from tfperf.results.discovery import Discovery
from tfperf.results.tune import Measurement, Objective

if TYPE_CHECKING:
    import optuna

_PIPELINE = "tfperf_pipeline"
_OBJECTIVE = "tfperf_objective"
_SOURCE = "tfperf_source"
_REFERENCES = "tfperf_references_enqueued"
_GUIDE = "tfperf_guide"
_DISCOVERY = "tfperf_discovery"
_REMEASURE = "tfperf_remeasure"
_REMEASURED_BY = "tfperf_remeasured_by"
_STEP_TIME = "tfperf_step_time_s"


@dataclasses.dataclass(frozen=True)
class RemeasureCover:
    """What a stored re-measurement covers: how many counted trials had finished when it was
    measured, the trial that held its lock, and who measured it (`worker_record`)."""

    trials: int
    lock_trial: int | None = None
    worker: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class StudyRecord:
    """A study's tfperf attributes (see the module docstring).

    A record may be partial: writing one (`write_study`) sets only the attributes it has, so
    tuners sharing a study each write what they know when they know it.
    """

    pipeline: str | None = None
    objective: Objective | None = None
    source: str | None = None
    references_enqueued: bool = False
    guide: Mapping[str, Any] | None = None
    discovery: Discovery | None = None
    code_root: str | None = None
    remeasured: list[Measurement] | None = None
    remeasured_by: RemeasureCover | None = None
    step_time_s: float | None = None

    @property
    def created_by_tfperf(self) -> bool:
        return self.pipeline is not None

    @classmethod
    def from_attrs(cls, attrs: Mapping[str, Any], *, source: str = "the study") -> StudyRecord:
        """The record of stored attributes; what this tfperf cannot read is left out.

        Raises:
            ResultFileError: a stored re-measurement does not match `Measurement`.
        """
        objective = attrs.get(_OBJECTIVE)
        guide = attrs.get(_GUIDE)
        found = attrs.get(_DISCOVERY)
        found = found if isinstance(found, Mapping) else {}
        measured = attrs.get(_REMEASURE)
        covered = attrs.get(_REMEASURED_BY)
        what = f"{source}'s stored re-measurement"
        return cls(
            pipeline=str(attrs[_PIPELINE]) if attrs.get(_PIPELINE) is not None else None,
            objective=Objective(objective) if _known(objective) else None,
            source=str(attrs[_SOURCE]) if isinstance(attrs.get(_SOURCE), str) else None,
            references_enqueued=bool(attrs.get(_REFERENCES)),
            guide=dict(guide) if isinstance(guide, Mapping) else None,
            discovery=Discovery.from_dict(dict(found)) if found else None,
            code_root=str(found["root"]) if "root" in found else None,
            remeasured=(
                [validated(Measurement, item, source=what) for item in measured]
                if isinstance(measured, list)
                else None
            ),
            remeasured_by=(
                validated(RemeasureCover, dict(covered), source=what)
                if isinstance(covered, Mapping) and covered
                else None
            ),
            step_time_s=_seconds(attrs.get(_STEP_TIME)),
        )

    def to_attrs(self) -> dict[str, Any]:
        """The attributes to store: plain JSON values, without fields that are not set."""
        attrs: dict[str, Any] = {}
        if self.pipeline is not None:
            attrs[_PIPELINE] = self.pipeline
        if self.objective is not None:
            attrs[_OBJECTIVE] = self.objective.value
        if self.source is not None:
            attrs[_SOURCE] = self.source
        if self.references_enqueued:
            attrs[_REFERENCES] = True
        if self.guide is not None:
            attrs[_GUIDE] = dict(self.guide)
        if self.discovery is not None:
            attrs[_DISCOVERY] = {"root": self.code_root, **self.discovery.to_dict()}
        if self.remeasured is not None:
            attrs[_REMEASURE] = [plain_dict(m) for m in self.remeasured]
        if self.remeasured_by is not None:
            attrs[_REMEASURED_BY] = dataclasses.asdict(self.remeasured_by)
        if self.step_time_s is not None:
            attrs[_STEP_TIME] = self.step_time_s
        return attrs


def _seconds(value: Any) -> float | None:
    """A stored number of seconds; None for none, or for what is no number."""
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if is_number else None


def _known(objective: Any) -> bool:
    return isinstance(objective, str) and objective in {o.value for o in Objective}


def read_study(study: optuna.Study) -> StudyRecord:
    """The tfperf record of a study (an empty one for a study tfperf did not create)."""
    return StudyRecord.from_attrs(study.user_attrs, source=f"study {study.study_name!r}")


def write_study(study: optuna.Study, record: StudyRecord) -> None:
    """Stores the attributes `record` has, in field order (a re-measurement before what it
    covers, which readers check first)."""
    for key, value in record.to_attrs().items():
        study.set_user_attr(key, value)
