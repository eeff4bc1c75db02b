"""Call-site knobs: the names of tf.data arguments in a user's own files, and their values.

A pipeline whose `make_dataset()` takes no knobs, or a training script, writes its settings as
literal arguments: `ds.map(parse, num_parallel_calls=4)`, `ds.batch(32)`. `tfperf.sites`
records every such call while the dataset is built; each tunable argument becomes a *site
knob* named by its place, `map@pipeline.py:23.num_parallel_calls` (the method, the file
relative to the pipeline's folder, the line of the method's name, the argument). When a line
holds two calls of one method, `#1`, `#2` (in the order they end) follow the line:
`map@pipeline.py:23#2.num_parallel_calls`.

A PyTorch script's `DataLoader(...)` calls are sites the same way:
`DataLoader@train.py:40.num_workers` (`tfperf.frameworks.torch`'s recorder).

This module owns that grammar, with no TensorFlow: `SiteName` parses (`SiteName.parse`) and
prints (`str`) a name, and nothing else in tfperf builds or splits one; `SiteValues` is the
typed, immutable mapping of site names to values that `Knobs.sites` holds.

Example:
    >>> check_site_value("map@pipeline.py:23.num_parallel_calls", "AUTOTUNE")
    -1
    >>> SiteName.parse("batch@data/input.py:7.batch_size").file
    'data/input.py'
    >>> str(SiteName("map", "pipeline.py", 23, 2, "num_parallel_calls"))
    'map@pipeline.py:23#2.num_parallel_calls'
"""

from __future__ import annotations

import dataclasses
import operator
import re
from collections.abc import Iterable, Iterator, Mapping
from enum import Enum
from typing import Any

from tfperf.errors import KnobError

#: tf.data.AUTOTUNE, repeated so this module never imports TensorFlow.
AUTOTUNE = -1


class SiteKind(str, Enum):
    """What an argument controls, which fixes the values it accepts and its search range."""

    PARALLELISM = "parallelism"  # an integer >= 1 or AUTOTUNE; None where tf.data allows it
    PREFETCH = "prefetch"  # batches buffered: an integer >= 0 or AUTOTUNE
    SHUFFLE = "shuffle"  # elements in the shuffle buffer: an integer >= 1
    BATCH = "batch"  # examples per batch: an integer >= 1; changes training
    EDIT = "edit"  # a structure edit tfperf may make (`STRUCTURE_EDITS`): 0 as written, 1 made
    WORKERS = "workers"  # a DataLoader's worker processes: an integer >= 0 (0: in the trainer)
    FLAG = "flag"  # a DataLoader switch: 0 (False) or 1 (True)
    FACTOR = "factor"  # batches each DataLoader worker loads ahead: an integer >= 1
    # (None, where the call leaves any of these three out: the DataLoader's default)

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
    SiteKind.EDIT: "0 (the code as written) or 1 (the edit made)",
    SiteKind.WORKERS: "an integer >= 0 or None",
    SiteKind.FLAG: "0 (False), 1 (True) or None",
    SiteKind.FACTOR: "an integer >= 1 or None",
}
#: The kinds whose value may be None (the default of a call that leaves the argument out).
_NONE_OK = frozenset({SiteKind.PARALLELISM, SiteKind.WORKERS, SiteKind.FLAG, SiteKind.FACTOR})


#: (call, argument) -> (site kind, tuned when the call leaves it out). A call is a `Dataset`
#: method or a reader's public class name. The kinds live here, with no TensorFlow, because
#: site names are checked without it; everything else tfperf knows about each call (its
#: tf.data classes, stage kind, AUTOTUNE model nodes) is in `frameworks.tensorflow`, whose
#: `Method.arguments` reads this table. An absent `batch(num_parallel_calls)` stays untuned:
#: parallel batching rarely pays, and every extra dimension costs the search trials.
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
    # A PyTorch `DataLoader(...)` call in a script (`tfperf.frameworks.torch`'s recorder).
    ("DataLoader", "num_workers"): (SiteKind.WORKERS, True),
    ("DataLoader", "batch_size"): (SiteKind.BATCH, False),
    ("DataLoader", "pin_memory"): (SiteKind.FLAG, True),
    ("DataLoader", "persistent_workers"): (SiteKind.FLAG, True),
    ("DataLoader", "prefetch_factor"): (SiteKind.FACTOR, True),
}

#: Structure edits tfperf may make at a call of the user's (TensorFlow's recorder), named like
#: a site on the line of the call they follow: `cache@p.py:12.added` (a `cache()` appended to
#: the call on line 12), `shuffle@p.py:12.before_map` (the shuffle that reads the map on line
#: 12 moved before it), `map@p.py:12.after_batch` (that map moved after the batch that reads
#: it). Not in `TUNABLE`: no call is intercepted for them, and no argument is rewritten.
STRUCTURE_EDITS: dict[tuple[str, str], SiteKind] = {
    ("cache", "added"): SiteKind.EDIT,
    ("shuffle", "before_map"): SiteKind.EDIT,
    ("map", "after_batch"): SiteKind.EDIT,
}

_NAME = re.compile(
    r"^(?P<method>[A-Za-z_]\w*)@(?P<file>[^@]+?):(?P<line>\d+)(?:#(?P<nth>\d+))?"
    r"\.(?P<argument>[A-Za-z_]\w*)$"
)


@dataclasses.dataclass(frozen=True)
class SiteName:
    """The parts of a site knob's name; `nth` only where a line holds two calls alike.

    `str()` gives the canonical name and `SiteName.parse` reads one back:

    >>> name = SiteName.parse("map@data/input.py:23#2.num_parallel_calls")
    >>> name.file, name.line, name.nth
    ('data/input.py', 23, 2)
    >>> str(name)
    'map@data/input.py:23#2.num_parallel_calls'
    """

    method: str
    file: str
    line: int
    nth: int | None
    argument: str

    def __str__(self) -> str:
        nth = f"#{self.nth}" if self.nth is not None else ""
        return f"{self.method}@{self.file}:{self.line}{nth}.{self.argument}"

    @classmethod
    def parse(cls, text: str) -> SiteName:
        """Splits `map@pipeline.py:23.num_parallel_calls` into its parts.

        Raises:
            KnobError: `text` is not a site name, or names an argument tfperf does not tune.
        """
        match = _NAME.match(text)
        if match is None:
            raise KnobError(
                f"{text!r} is not a call-site name; they read METHOD@FILE:LINE.ARGUMENT, e.g. "
                "'map@pipeline.py:23.num_parallel_calls' (`tfperf profile` lists them)."
            )
        parsed = cls(
            method=match["method"],
            file=match["file"],
            line=int(match["line"]),
            nth=int(match["nth"]) if match["nth"] else None,
            argument=match["argument"],
        )
        site_kind(parsed.method, parsed.argument, text)  # raises for an untuned argument
        return parsed

    @property
    def kind(self) -> SiteKind:
        """What the argument controls (`KnobError` when tfperf does not tune it)."""
        return site_kind(self.method, self.argument, str(self))


def is_site_name(name: str) -> bool:
    """Whether `name` reads like a site knob (a knob name never holds '@')."""
    return "@" in name


def site_kind(method: str, argument: str, name: str = "") -> SiteKind:
    """The kind of `method(argument=...)`; raises `KnobError` when tfperf does not tune it."""
    entry = TUNABLE.get((method, argument))
    if entry is None and (method, argument) in STRUCTURE_EDITS:
        return STRUCTURE_EDITS[(method, argument)]
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
    kind = SiteName.parse(name).kind
    if isinstance(value, str) and value.strip().upper() == "AUTOTUNE":
        value = AUTOTUNE
    # None: the call's default (tf.data's, or the DataLoader's where the call leaves it out).
    if value is None and kind in _NONE_OK:
        return None
    if kind is SiteKind.FLAG and isinstance(value, bool):
        return int(value)
    number = as_int(value)
    if kind in (SiteKind.EDIT, SiteKind.FLAG):
        if number in (0, 1):
            return number
        raise KnobError(f"site {name!r} must be {kind.accepts}, but got {value!r}.")
    autotune_ok = kind in (SiteKind.PARALLELISM, SiteKind.PREFETCH)
    lowest = 0 if kind in (SiteKind.PREFETCH, SiteKind.WORKERS) else 1
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


def as_int(value: Any) -> int | None:
    """`value` as an integer, None if it is none; a bool is none (`batch(True)` is a mistake)."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def training_sites(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """Sites whose change alters training, not only speed (batch sizes, shuffle buffers).

    `tfperf.results.training_changes` adds the global knobs: the one rule tfperf applies.
    """
    return [
        name
        for name in sorted(set(before) | set(after))
        if before.get(name) != after.get(name) and SiteName.parse(name).kind.changes_training
    ]
