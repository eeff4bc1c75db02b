"""Call sites of tf.data in a user's own files: what tfperf found, named, and may tune.

A pipeline whose `make_dataset()` takes no knobs, or a training script, writes its settings as
literal arguments: `ds.map(parse, num_parallel_calls=4)`, `ds.batch(32)`. `tfperf.callsites`
records every such call while the dataset is built; each tunable argument becomes a *site
knob* named by its place, `map@pipeline.py:23.num_parallel_calls` (the method, the file
relative to the pipeline's folder, the line of the method's name, the argument). When a line
holds two calls of one method, `#1`, `#2` (in the order they end) follow the line:
`map@pipeline.py:23#2.num_parallel_calls`.

This module is the plain-data side: no TensorFlow. `Discovery` round-trips through JSON so a
child process can report what it found; `SiteValues` is the typed, immutable mapping of site
names to values that `Knobs.sites` holds.

Example:
    >>> check_site_value("map@pipeline.py:23.num_parallel_calls", "AUTOTUNE")
    -1
    >>> parse_site_name("batch@data/input.py:7.batch_size").file
    'data/input.py'
"""

from __future__ import annotations

import dataclasses
import operator
import re
from collections.abc import Iterable, Iterator, Mapping
from enum import Enum
from typing import Any

from tfperf.errors import KnobError

__all__ = [
    "AUTOTUNE",
    "TUNABLE",
    "ArgumentForm",
    "CallSite",
    "Discovery",
    "SiteKind",
    "SiteName",
    "SiteValues",
    "SlowStage",
    "Untunable",
    "check_site_value",
    "describe_discovery",
    "format_site_value",
    "is_site_name",
    "parse_site_name",
    "site_kind",
]

#: tf.data.AUTOTUNE, repeated so this module never imports TensorFlow.
AUTOTUNE = -1


class SiteKind(str, Enum):
    """What an argument controls, which fixes the values it accepts and its search range."""

    PARALLELISM = "parallelism"  # an integer >= 1 or AUTOTUNE; None where tf.data allows it
    PREFETCH = "prefetch"  # batches buffered: an integer >= 0 or AUTOTUNE
    SHUFFLE = "shuffle"  # elements in the shuffle buffer: an integer >= 1
    BATCH = "batch"  # examples per batch: an integer >= 1; changes training

    @property
    def accepts(self) -> str:
        return _ACCEPTS[self]

    @property
    def changes_training(self) -> bool:
        """Whether another value changes what the model learns, not only how fast."""
        return self in (SiteKind.SHUFFLE, SiteKind.BATCH)


_ACCEPTS = {
    SiteKind.PARALLELISM: "an integer >= 1, AUTOTUNE or None",
    SiteKind.PREFETCH: "an integer >= 0 or AUTOTUNE",
    SiteKind.SHUFFLE: "an integer >= 1",
    SiteKind.BATCH: "an integer >= 1",
}


class ArgumentForm(str, Enum):
    """How the call passed the argument, which decides how a patch rewrites it."""

    KEYWORD = "keyword"
    POSITIONAL = "positional"
    ABSENT = "absent"


#: (method, argument) -> (kind, tuned when the call leaves it out). Readers are named by their
#: public class name. An absent `batch(num_parallel_calls)` stays untuned: parallel batching
#: rarely pays, and every extra dimension costs the search trials.
TUNABLE: dict[tuple[str, str], tuple[SiteKind, bool]] = {
    ("map", "num_parallel_calls"): (SiteKind.PARALLELISM, True),
    ("interleave", "cycle_length"): (SiteKind.PARALLELISM, True),
    ("interleave", "num_parallel_calls"): (SiteKind.PARALLELISM, True),
    ("batch", "batch_size"): (SiteKind.BATCH, False),
    ("batch", "num_parallel_calls"): (SiteKind.PARALLELISM, False),
    ("padded_batch", "batch_size"): (SiteKind.BATCH, False),
    ("shuffle", "buffer_size"): (SiteKind.SHUFFLE, False),
    ("prefetch", "buffer_size"): (SiteKind.PREFETCH, False),
    ("TFRecordDataset", "num_parallel_reads"): (SiteKind.PARALLELISM, True),
    ("TextLineDataset", "num_parallel_reads"): (SiteKind.PARALLELISM, True),
    ("FixedLengthRecordDataset", "num_parallel_reads"): (SiteKind.PARALLELISM, True),
}

_NAME = re.compile(
    r"^(?P<method>[A-Za-z_]\w*)@(?P<file>[^@]+?):(?P<line>\d+)(?:#(?P<nth>\d+))?"
    r"\.(?P<argument>[A-Za-z_]\w*)$"
)


@dataclasses.dataclass(frozen=True)
class SiteName:
    """The parts of a site knob's name; `nth` only where a line holds two calls alike."""

    method: str
    file: str
    line: int
    nth: int | None
    argument: str


def parse_site_name(name: str) -> SiteName:
    """Splits `map@pipeline.py:23.num_parallel_calls` into its parts.

    Raises:
        KnobError: `name` is not a site name, or names an argument tfperf does not tune.
    """
    match = _NAME.match(name)
    if match is None:
        raise KnobError(
            f"{name!r} is not a call-site name; they read METHOD@FILE:LINE.ARGUMENT, e.g. "
            "'map@pipeline.py:23.num_parallel_calls' (`tfperf profile` lists them)."
        )
    parsed = SiteName(
        method=match["method"],
        file=match["file"],
        line=int(match["line"]),
        nth=int(match["nth"]) if match["nth"] else None,
        argument=match["argument"],
    )
    site_kind(parsed.method, parsed.argument, name)
    return parsed


def is_site_name(name: str) -> bool:
    """Whether `name` reads like a site knob (a knob name never holds '@')."""
    return "@" in name


def site_kind(method: str, argument: str, name: str = "") -> SiteKind:
    """The kind of `method(argument=...)`; raises `KnobError` when tfperf does not tune it."""
    entry = TUNABLE.get((method, argument))
    if entry is None:
        tuned = ", ".join(f"{m}({a})" for m, a in TUNABLE)
        raise KnobError(
            f"{name or method}: tfperf does not tune `{method}({argument}=...)`; it tunes {tuned}."
        )
    return entry[0]


def check_site_value(name: str, value: Any) -> int | None:
    """Validates one value for site `name` and returns it normalised ('AUTOTUNE' -> -1).

    Raises:
        KnobError: the name is not a site, or the value does not suit its argument.
    """
    parsed = parse_site_name(name)
    kind = site_kind(parsed.method, parsed.argument, name)
    if isinstance(value, str) and value.strip().upper() == "AUTOTUNE":
        value = AUTOTUNE
    if value is None and kind is SiteKind.PARALLELISM:
        return None
    number = _as_int(value)
    autotune_ok = kind in (SiteKind.PARALLELISM, SiteKind.PREFETCH)
    lowest = 0 if kind is SiteKind.PREFETCH else 1
    if number is not None and (number >= lowest or (autotune_ok and number == AUTOTUNE)):
        return number
    raise KnobError(f"site {name!r} must be {kind.accepts}, but got {value!r}.")


def format_site_value(value: int | None) -> str:
    """How a site value reads in messages: AUTOTUNE by name, None as tf.data's default."""
    if value is None:
        return "None (tf.data's default)"
    return "AUTOTUNE" if value == AUTOTUNE else str(value)


class SiteValues(Mapping[str, "int | None"]):
    """An immutable, hashable mapping of site names to values, each checked on creation.

    None means "as tf.data does without the argument" and is allowed only for parallelism.

    >>> SiteValues({"prefetch@p.py:9.buffer_size": "AUTOTUNE"})
    SiteValues({'prefetch@p.py:9.buffer_size': -1})
    """

    __slots__ = ("_items",)

    def __init__(self, values: Mapping[str, Any] | Iterable[tuple[str, Any]] = ()) -> None:
        pairs = values.items() if isinstance(values, Mapping) else values
        checked = {name: check_site_value(name, value) for name, value in pairs}
        self._items: tuple[tuple[str, int | None], ...] = tuple(sorted(checked.items()))

    def __getitem__(self, name: str) -> int | None:
        for key, value in self._items:
            if key == name:
                return value
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return (key for key, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return dict(self._items) == dict(other.items())
        return NotImplemented

    def __repr__(self) -> str:
        return f"SiteValues({dict(self._items)!r})"

    def updated(self, changes: Mapping[str, Any]) -> SiteValues:
        """A copy with `changes` applied (each checked)."""
        return SiteValues({**dict(self._items), **changes})


@dataclasses.dataclass(frozen=True)
class CallSite:
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
        return site_kind(self.method, self.argument, self.name)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "form": self.form.value}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CallSite:
        return cls(**{**data, "form": ArgumentForm(data["form"])})


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

    def describe(self) -> str:
        via = f" (reached from {self.reached_from})" if self.reached_from else ""
        return f"{self.call} at {self.where}{via}: {self.reason}"


@dataclasses.dataclass(frozen=True)
class SlowStage:
    """The stage that limits the pipeline as written (`tfperf.stages`), and the sites in it.

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
        return f"The stage that limits your pipeline as written: {self.label}{where}{adds}{tuned}."


@dataclasses.dataclass(frozen=True)
class Discovery:
    """Every tunable call site and every call that is "not tunable here", in one build.

    `slowest` is the limiting stage when the stages were measured too, else None.
    """

    sites: tuple[CallSite, ...] = ()
    untunable: tuple[Untunable, ...] = ()
    slowest: SlowStage | None = None

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

    def to_dict(self) -> dict[str, Any]:
        return {
            "sites": [site.to_dict() for site in self.sites],
            "untunable": [dataclasses.asdict(item) for item in self.untunable],
            "slowest": dataclasses.asdict(self.slowest) if self.slowest else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Discovery:
        slowest = data.get("slowest")
        return cls(
            sites=tuple(CallSite.from_dict(site) for site in data.get("sites", ())),
            untunable=tuple(Untunable(**item) for item in data.get("untunable", ())),
            slowest=None
            if not slowest
            else SlowStage(**{**slowest, "sites": tuple(slowest["sites"])}),
        )


def describe_discovery(discovery: Discovery) -> list[str]:
    """Lines for a terminal: the tunable sites with their values, then the untunable calls."""
    if not discovery.sites:
        lines = ["No tunable tf.data call was found in your files."]
    else:
        width = max(len(site.name) for site in discovery.sites)
        lines = [f"Tunable call sites ({len(discovery.sites)}), as written:"]
        for site in discovery.sites:
            value = (
                "not given" if site.form is ArgumentForm.ABSENT else format_site_value(site.value)
            )
            lines.append(f"  {site.name.ljust(width)}  {value}")
    if discovery.untunable:
        lines.append(f"Not tunable here ({len(discovery.untunable)}):")
        lines.extend(f"  {item.describe()}" for item in discovery.untunable)
    if discovery.slowest is not None:
        lines.append(discovery.slowest.describe())
    return lines


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):  # `batch(True)` is always a mistake
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def training_sites(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """Sites whose change alters training, not only speed (batch sizes, shuffle buffers)."""
    return [
        name
        for name in sorted(set(before) | set(after))
        if before.get(name) != after.get(name) and _changes_training(name)
    ]


def _changes_training(name: str) -> bool:
    parsed = parse_site_name(name)
    return site_kind(parsed.method, parsed.argument, name).changes_training
