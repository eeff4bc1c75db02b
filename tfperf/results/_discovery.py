"""What a build of a plain file or script found: its tf.data call sites, as plain records.

`Discovery` round-trips through JSON (a `JsonRecord`, validated on the way back) so a child
process can report what it found, and a study can keep it for the report.
"""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Any

from tfperf.errors import KnobError
from tfperf.knobs import SiteKind, SiteName, format_site_value, site_kind
from tfperf.results._json import JsonRecord
from tfperf.results._stages import method_named


class ArgumentForm(str, Enum):
    """How the call passed the argument, which decides how a patch rewrites it."""

    KEYWORD = "keyword"
    POSITIONAL = "positional"
    ABSENT = "absent"


@dataclasses.dataclass(frozen=True)
class CallSite(JsonRecord):
    """One tunable argument of one call in the user's files, as the dataset was built.

    `file` is relative to the pipeline's folder ('/'-separated); `line` is the line of the
    method's name. `col`, `end_line`, `end_col` give the call expression's span as Python
    reports it (0-based UTF-8 byte columns, like `ast`); they are None where the call ran
    inside a function AutoGraph converted, which maps lines but not columns. `value` is what
    the call passed (None when absent); `index` is the argument's position when positional.
    `calls` counts how often the call ran while the dataset was built.
    """

    name: str
    file: str
    line: int
    col: int | None
    end_line: int | None
    end_col: int | None
    method: str
    argument: str
    form: ArgumentForm
    index: int | None
    value: int | None
    calls: int = 1

    @property
    def kind(self) -> SiteKind:
        """What the value controls, as the name says (`DataLoader@train.py:12.num_workers`);
        `method` and `argument` say where it is written, which for a value a library gets
        from an argparse option is that option's `add_argument(default=...)`."""
        name = SiteName.parse(self.name)
        return site_kind(name.method, name.argument, self.name)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @classmethod
    def from_dict(cls, data: Any) -> CallSite:
        """Validates and rebuilds a site from `to_dict` output (`ResultFileError` if it is not
        one)."""
        return cls.validate(data)


@dataclasses.dataclass(frozen=True)
class Untunable:
    """A tf.data call tfperf saw but will not tune, and why.

    `where` is the call's file and line (a library path from its package on, e.g.
    `keras/src/utils/timeseries_dataset_utils.py:278`); `reached_from` is the user's line
    that led to it, when there is one.
    """

    call: str
    where: str
    reached_from: str | None
    reason: str

    @property
    def method(self) -> str:
        """The method its call names: `map(num_parallel_calls=...)` -> `map`."""
        return method_named(self.call)

    def describe(self) -> str:
        via = f" (reached from {self.reached_from})" if self.reached_from else ""
        return f"{self.call} at {self.where}{via}: {self.reason}"


@dataclasses.dataclass(frozen=True)
class SlowStage:
    """The costliest stage of the input pipeline as written, run alone (a framework's stage
    analysis, before the model's rate is known: whether it limits training is the profile's
    to say), and the sites in it.

    `location` is where the stage's function is defined, when it has one; `sites` are the
    call sites whose call made this stage (empty for a stage tfperf cannot tune here).
    """

    label: str
    location: str | None
    added_s_per_example: float | None
    sites: tuple[str, ...]

    def describe(self) -> str:
        where = f" ({self.location})" if self.location else ""
        cost = self.added_s_per_example
        adds = f", adding {cost * 1e3:.3g} ms per example" if cost is not None else ""
        tuned = (
            f"; its values: {', '.join(self.sites)}"
            if self.sites
            else "; none of its values is written in a call tfperf can tune"
        )
        return (
            f"The costliest stage of your input pipeline as written, run alone: {self.label}"
            f"{where}{adds}{tuned}."
        )


@dataclasses.dataclass(frozen=True)
class Discovery(JsonRecord):
    """Every tunable call site and every call that is "not tunable here", in one build.

    `slowest` is the costliest stage when the stages were measured too, else None.
    """

    sites: tuple[CallSite, ...] = ()
    untunable: tuple[Untunable, ...] = ()
    slowest: SlowStage | None = None
    # "FILE:LINE" where the dataset is handed over: a script's `fit` call or the loop of its
    # own that iterates it, or the line of a plain file's `def make_dataset`; where a patch
    # inserts what tfperf applied itself.
    end: str | None = None
    # `fit` at `end` gets arrays: the dataset measured is the one Keras builds from them, so
    # options and a prefetch have no dataset of the user's to go on (a precision still does).
    fit_gets_arrays: bool = False

    def values(self) -> dict[str, int | None]:
        """The value each site has in the user's code: the baseline of a search."""
        return {site.name: site.value for site in self.sites}

    def site(self, name: str) -> CallSite:
        """The site called `name`; `KnobError` listing the known names when there is none."""
        for site in self.sites:
            if site.name == name:
                return site
        known = ", ".join(site.name for site in self.sites) or "none"
        raise KnobError(
            f"no call site {name!r} was found while building the dataset. Sites found: {known}."
        )

    @classmethod
    def from_dict(cls, data: Any) -> Discovery:
        """Validates and rebuilds a discovery from `to_dict` output; keys it does not know (a
        study stores the code's `root` beside it) are ignored.

        Raises:
            ResultFileError: the data is not a discovery; the message names each field at fault.
        """
        return cls.validate(data)


def describe_discovery(discovery: Discovery) -> list[str]:
    """Lines for a terminal: the tunable sites with their values, then the untunable calls."""
    if not discovery.sites:
        lines = ["No tunable tf.data call was found in your files."]
        if discovery.fit_gets_arrays:
            lines = [
                f"No tunable tf.data call was found in your files: `fit` at {discovery.end} "
                "gets arrays, and Keras builds their dataset itself. To tune it, build it "
                "yourself (tf.data.Dataset.from_tensor_slices) and pass that to fit."
            ]
    else:
        width = max(len(site.name) for site in discovery.sites)
        lines = [f"Tunable call sites ({len(discovery.sites)}), as written:"]
        for site in discovery.sites:
            value = (
                "as written (a structure edit tfperf can make)"
                if site.kind is SiteKind.EDIT
                else "none (tfperf can add one)"
                if site.calls == 0
                else "not set"
                if site.form is ArgumentForm.ABSENT
                else format_site_value(site.value)
            )
            lines.append(f"  {site.name.ljust(width)}  {value}")
    if discovery.untunable:
        lines.append(f"Not tunable here ({len(discovery.untunable)}):")
        lines.extend(f"  {item.describe()}" for item in discovery.untunable)
    if discovery.slowest is not None:
        lines.append(discovery.slowest.describe())
    return lines
