"""The configuration knobs tfperf measures and tunes: a closed, typed, frozen dataclass.

`Knobs` is what a pipeline file's `make_dataset(knobs)`, `make_model(knobs)` and
`make_train_step(knobs)` receive. It imports no TensorFlow, so results and reports that carry
knobs can be read on a machine without it.

For code that reads no knobs (a plain `make_dataset()`, a training script), `Knobs.sites` holds
the values of the tf.data call sites tfperf found in it (`tfperf.sites`), by name:
`{"map@pipeline.py:23.num_parallel_calls": 8}`. They travel inside `Knobs` wherever knobs do
(trials, stored studies, results), and a site name is accepted wherever a knob name is.

Example:
    >>> knobs = Knobs.from_mapping({"batch_size": 64, "num_parallel_calls": "AUTOTUNE"})
    >>> knobs.batch_size, knobs.num_parallel_calls == AUTOTUNE
    (64, True)
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Mapping
from enum import Enum
from typing import Any

from tfperf.errors import KnobError
from tfperf.knobs._sitename import AUTOTUNE, SiteValues, check_site_value, is_site_name

#: Knobs that only the user's code applies, by reading them in `make_dataset(knobs)`. A
#: pipeline whose code takes no knobs (a plain `make_dataset()`, a script) tunes the values
#: written in its calls instead, as `Knobs.sites`.
CODE_KNOBS = (
    "batch_size",
    "shuffle_buffer",
    "num_parallel_calls",
    "cycle_length",
    "num_parallel_reads",
    "prefetch",
)
#: The field holding the call-site values.
SITES = "sites"
#: Knobs that act only under a `tf.distribute` strategy (see docs/multi-device.md): tfperf
#: applies them when it distributes the dataset, and the tuner searches them only then.
STRATEGY_KNOBS = ("auto_shard_policy", "fetch_to_device", "per_replica_buffer_size")


class Precision(str, Enum):
    """Keras mixed-precision policies tfperf can apply before `make_model` runs."""

    FLOAT32 = "float32"
    MIXED_FLOAT16 = "mixed_float16"
    MIXED_BFLOAT16 = "mixed_bfloat16"


class ShardPolicy(str, Enum):
    """`tf.data.experimental.AutoShardPolicy`: how tf.distribute splits input between workers."""

    AUTO = "auto"  # by file if the source reads files, else by element
    FILE = "file"  # each worker reads its own files
    DATA = "data"  # each worker reads everything and keeps every n-th element
    OFF = "off"  # no sharding: every worker sees all the data


class _Kind(str, Enum):
    """How a knob's value is checked; kept apart from the field so messages can explain it."""

    POSITIVE_INT = "an integer >= 1"
    NON_NEGATIVE_INT = "an integer >= 0"
    PARALLELISM = "an integer >= 1 or AUTOTUNE"
    OPTIONAL_PARALLELISM = "an integer >= 1, AUTOTUNE or None (tf.data's default)"
    BUFFER = "an integer >= 0 or AUTOTUNE"
    OPTIONAL_BOOL = "true, false or None"
    OPTIONAL_THREADS = "an integer >= 1 or None"
    PRECISION = "one of 'float32', 'mixed_float16', 'mixed_bfloat16'"
    SHARD_POLICY = "one of 'auto', 'file', 'data', 'off', or None (tf.data's default, auto)"
    SITES = "a mapping of call-site names to values"


def _knob(default: Any, kind: _Kind, doc: str) -> Any:
    return dataclasses.field(default=default, metadata={"kind": kind, "doc": doc})


@dataclasses.dataclass(frozen=True)
class Knobs:
    """Input-pipeline and training settings for one measured configuration.

    Parallelism-like knobs accept `AUTOTUNE` (the same value as `tf.data.AUTOTUNE`), which lets
    the tf.data runtime choose. `None` on the tri-state options means "leave tf.data's default".
    The defaults follow the tf.data performance guide; a pipeline file's `BASELINE` overrides them.
    """

    batch_size: int = _knob(32, _Kind.POSITIVE_INT, "Examples per batch.")
    shuffle_buffer: int = _knob(
        1024, _Kind.POSITIVE_INT, "Elements held by `shuffle(buffer_size)`; host RAM grows with it."
    )
    num_parallel_calls: int | None = _knob(
        AUTOTUNE,
        _Kind.OPTIONAL_PARALLELISM,
        "Parallel invocations of `map(num_parallel_calls=...)`; None: one at a time.",
    )
    cycle_length: int | None = _knob(
        AUTOTUNE,
        _Kind.OPTIONAL_PARALLELISM,
        "Input elements `interleave(cycle_length=...)` reads at once; None: one per CPU core.",
    )
    num_parallel_reads: int | None = _knob(
        AUTOTUNE,
        _Kind.OPTIONAL_PARALLELISM,
        "Files read at once, e.g. `TFRecordDataset(num_parallel_reads)`; None: one at a time.",
    )
    prefetch: int = _knob(
        AUTOTUNE, _Kind.BUFFER, "Batches buffered by `prefetch(buffer_size)`; 0 means no prefetch."
    )
    mixed_precision: Precision = _knob(  # noqa: RUF009 (`_knob` returns a dataclasses.field)
        Precision.FLOAT32, _Kind.PRECISION, "Keras global policy tfperf sets before `make_model`."
    )
    deterministic: bool | None = _knob(
        None,
        _Kind.OPTIONAL_BOOL,
        "tf.data `Options.deterministic`, applied by tfperf; None keeps tf.data's default (True).",
    )
    private_threadpool_size: int | None = _knob(
        None,
        _Kind.OPTIONAL_THREADS,
        "tf.data `threading.private_threadpool_size`, set by tfperf; None uses the shared pool.",
    )
    auto_shard_policy: ShardPolicy | None = _knob(  # noqa: RUF009 (see `sites`)
        None,
        _Kind.SHARD_POLICY,
        "tf.data `experimental_distribute.auto_shard_policy` under a strategy; None keeps "
        "tf.data's default (auto). Acts only with more than one input worker.",
    )
    fetch_to_device: bool | None = _knob(
        None,
        _Kind.OPTIONAL_BOOL,
        "`tf.distribute.InputOptions.experimental_fetch_to_device` under a strategy: prefetch "
        "batches onto the replicas' devices; None keeps TensorFlow's default (True).",
    )
    per_replica_buffer_size: int | None = _knob(
        None,
        _Kind.OPTIONAL_THREADS,
        "`tf.distribute.InputOptions.experimental_per_replica_buffer_size` under a strategy: "
        "batches prefetched per replica device; None keeps TensorFlow's default (1).",
    )
    gpu_memory_growth: bool | None = _knob(
        None,
        _Kind.OPTIONAL_BOOL,
        "TensorFlow GPU memory growth (`tf.config.experimental.set_memory_growth`), set by "
        "tfperf before TensorFlow starts its GPUs; None keeps tfperf's default (growth on in "
        "the processes it measures). A `--gpu-memory-limit` overrides it.",
    )
    sites: SiteValues = _knob(  # noqa: RUF009 (`_knob` returns a dataclasses.field)
        SiteValues(),
        _Kind.SITES,
        "Values tfperf passes instead of those written at call sites in the user's code, e.g. "
        "`{'map@pipeline.py:23.num_parallel_calls': 8}`; empty for a file that reads knobs.",
    )

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = _check_value(field.name, field.metadata["kind"], getattr(self, field.name))
            object.__setattr__(self, field.name, value)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The knob names, in declaration order; site values are apart, under `sites`."""
        return tuple(field.name for field in dataclasses.fields(cls) if field.name != SITES)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], *, source: str = "knobs") -> Knobs:
        """Builds knobs from a dict such as a pipeline file's `BASELINE` or `to_dict()`.

        Site values may come under `"sites"` (as `to_dict()` writes them) or as names of
        their own (`{"map@pipeline.py:23.num_parallel_calls": 8}`).

        Raises:
            KnobError: a name is not a knob, or a value has the wrong type or range. `source`
                names where the mapping came from, so the message can point there.
        """
        check_names(values, source=source)
        try:
            return cls(**_with_sites(values, SiteValues()))
        except KnobError as error:
            raise KnobError(f"{source}: {error}") from None

    def replace(self, **changes: Any) -> Knobs:
        """A copy with `changes` applied; a site name changes that site's value.

        Raises:
            KnobError: a name is unknown, or a value is invalid.
        """
        check_names(changes, source="Knobs.replace")
        return dataclasses.replace(self, **_with_sites(changes, self.sites))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values (the precision as its string); `sites` only when set."""
        values = {name: _plain(getattr(self, name)) for name in self.names()}
        if self.sites:
            values[SITES] = dict(self.sites)
        return values

    def diff(self, other: Knobs) -> dict[str, tuple[Any, Any]]:
        """Knobs and sites whose values differ, as `{name: (self_value, other_value)}`."""
        mine = {**self.to_dict(), **self.sites}
        theirs = {**other.to_dict(), **other.sites}
        mine.pop(SITES, None)
        theirs.pop(SITES, None)
        return {
            name: (mine.get(name), theirs.get(name))
            for name in {**mine, **theirs}
            if mine.get(name) != theirs.get(name)
        }


def check_names(values: Mapping[str, Any], *, source: str) -> None:
    """Raises `KnobError` listing the valid names if `values` holds a name that is not a knob.

    `sites` and call-site names (`map@pipeline.py:23.num_parallel_calls`) are valid too.
    """
    unknown = [
        name
        for name in values
        if name not in Knobs.names() and name != SITES and not is_site_name(name)
    ]
    if unknown:
        raise KnobError(
            f"{source}: unknown knob name{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(repr(n) for n in unknown)}. Valid names: {', '.join(Knobs.names())}."
        )


def check_value(name: str, value: Any) -> Any:
    """Validates one value for knob `name` and returns it normalised (e.g. 'AUTOTUNE' -> -1).

    `name` may be a call site (`map@pipeline.py:23.num_parallel_calls`).
    """
    check_names({name: value}, source="knob")
    if is_site_name(name):
        return check_site_value(name, value)
    field = next(f for f in dataclasses.fields(Knobs) if f.name == name)
    return _check_value(name, field.metadata["kind"], value)


def format_value(value: Any) -> str:
    """How a knob value reads to a person: AUTOTUNE by name, strings unquoted."""
    if isinstance(value, Enum):
        return str(value.value)
    if value == AUTOTUNE and isinstance(value, int) and not isinstance(value, bool):
        return "AUTOTUNE"
    return str(value)


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


def _with_sites(values: Mapping[str, Any], sites: SiteValues) -> dict[str, Any]:
    """`values` with call-site names (and a `sites` mapping) merged into `sites`."""
    plain = {name: value for name, value in values.items() if not is_site_name(name)}
    given = plain.pop(SITES, None)
    if given is not None and not isinstance(given, Mapping):
        raise _bad(SITES, given, _Kind.SITES)
    changes = {**(given or {}), **{n: v for n, v in values.items() if is_site_name(n)}}
    if changes or given is not None:
        plain[SITES] = (sites if given is None else SiteValues()).updated(changes)
    return plain


def _check_value(name: str, kind: _Kind, value: Any) -> Any:
    if kind is _Kind.SITES:
        if isinstance(value, SiteValues):
            return value
        if isinstance(value, Mapping):
            return SiteValues(value)
        raise _bad(name, value, kind)
    if kind is _Kind.PRECISION:
        return _check_precision(name, value)
    if kind is _Kind.SHARD_POLICY:
        return _check_shard_policy(name, value)
    if kind is _Kind.OPTIONAL_BOOL:
        if value is None or isinstance(value, bool):
            return value
        raise _bad(name, value, kind)
    if value is None and kind in (_Kind.OPTIONAL_THREADS, _Kind.OPTIONAL_PARALLELISM):
        return None
    if isinstance(value, str) and value.strip().upper() == "AUTOTUNE":
        value = AUTOTUNE
    number = _as_int(value)
    if number is None:
        raise _bad(name, value, kind)
    accepts_autotune = kind in (_Kind.PARALLELISM, _Kind.OPTIONAL_PARALLELISM, _Kind.BUFFER)
    lowest = 0 if kind in (_Kind.NON_NEGATIVE_INT, _Kind.BUFFER) else 1
    if number >= lowest or (accepts_autotune and number == AUTOTUNE):
        return number
    raise _bad(name, value, kind)


def _check_precision(name: str, value: Any) -> Precision:
    try:
        return Precision(value)
    except ValueError:
        raise _bad(name, value, _Kind.PRECISION) from None


def _check_shard_policy(name: str, value: Any) -> ShardPolicy | None:
    if value is None:
        return None
    try:
        return ShardPolicy(value.lower() if isinstance(value, str) else value)
    except ValueError:
        raise _bad(name, value, _Kind.SHARD_POLICY) from None


def _as_int(value: Any) -> int | None:
    # bool is an int subclass, but `batch_size=True` is always a mistake.
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _bad(name: str, value: Any, kind: _Kind) -> KnobError:
    return KnobError(f"knob {name!r} must be {kind.value}, but got {value!r}.")
