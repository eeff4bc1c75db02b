"""What one knob declares: every fact about it that tfperf reads anywhere, in one record.

tf.data's `options.py` declares each option once, with `create_option(name, type, docstring,
default)`, and everything else reads that declaration. A `Knob` does the same for tfperf's
knobs: `knob(...)` declares one as a field of `Knobs`, and the search space, the options
tfperf applies and reads back, the report's words, the snippet and the zero-change edit are
all derived from it (through `KNOBS`, in `tfperf.knobs._knobs`). Nothing here imports
TensorFlow.

Example:
    >>> spec = knob(None, Kind.OPTIONAL_BOOL, "An example.", applied_by=Applier.TF_DATA,
    ...             option="deterministic", unset="deterministic")
    >>> spec.metadata["knob"].option
    'deterministic'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from enum import Enum
from typing import Any

from tfperf.knobs._choices import Precision
from tfperf.knobs._sitename import AUTOTUNE, TUNABLE, SiteKind

#: Prefetch depths (batches) a search tries; one or two hide step-to-step jitter, 0 measures
#: the no-overlap case, deeper buffers only cost RAM.
PREFETCH_DEPTHS = (0, 1, 2, 4, 8)
#: Multiples of the baseline's shuffle buffer a search tries: it changes how examples mix.
SHUFFLE_FACTORS = (0.25, 0.5, 1, 2, 4)
#: Multiples of the baseline's batch size a search tries: it changes the optimisation.
BATCH_FACTORS = (0.5, 1, 2, 4)
# Below this many workers, powers of two are few enough to try each.
_MIN_PARALLELISM_CAP = 8
# A DataLoader's workers may each block on I/O, so a search tries up to this many on any
# machine: a worker waiting on a read holds no core, so the useful count follows the read
# time, not the cores.
_MIN_WORKER_CAP = 32

#: The frameworks a knob acts in unless its declaration says otherwise.
TENSORFLOW = frozenset({"tensorflow"})
#: A knob of every framework's pipeline (the batch size, the training precision).
EVERY_FRAMEWORK = frozenset({"tensorflow", "torch"})
#: The knobs of a PyTorch DataLoader pipeline.
TORCH = frozenset({"torch"})


class Kind(str, Enum):
    """How a knob's value is checked; its text completes "must be ..." in a message."""

    POSITIVE_INT = "an integer >= 1"
    NON_NEGATIVE_INT = "an integer >= 0"
    PARALLELISM = "an integer >= 1 or AUTOTUNE"
    OPTIONAL_PARALLELISM = "an integer >= 1, AUTOTUNE or None (tf.data's default)"
    BUFFER = "an integer >= 0 or AUTOTUNE"
    OPTIONAL_BOOL = "true, false or None"
    OPTIONAL_THREADS = "an integer >= 1 or None"
    PRECISION = "one of 'float32', 'mixed_float16', 'mixed_bfloat16'"
    SHARD_POLICY = "one of 'auto', 'file', 'data', 'off', or None (tf.data's default, auto)"
    OPTIONAL_COUNT = "an integer >= 0 or None"
    START_METHOD = "one of 'fork', 'spawn', 'forkserver', or None (the platform's default)"
    SITES = "a mapping of call-site names to values"
    SERVICE_ADDRESS = "a tf.data service address such as grpc://HOST:PORT, or None (no service)"
    PROCESSING_MODE = "one of 'parallel_epochs', 'distributed_epoch', or None (parallel_epochs)"
    SERVICE_COMPRESSION = "one of 'auto', 'none', or None (tf.data's default, auto)"
    TARGET_WORKERS = "one of 'auto', 'any', 'local', or None (tf.data's default, auto)"
    JOB_NAME = "a job name (text) or None (a job of its own)"


class Applier(str, Enum):
    """Who puts a knob's value into effect."""

    CODE = "the user's code"  # reads it in make_dataset(knobs); a plain file has call sites
    TF_DATA = "a tf.data option"  # tfperf sets `Knob.option` on `tf.data.Options`
    PRECISION = "the Keras precision policy"  # set by tfperf before make_model runs
    STRATEGY = "the tf.distribute strategy"  # its InputOptions / auto-shard policy
    PROCESS = "tfperf before TensorFlow starts"  # e.g. GPU memory growth
    SERVICE = "tf.data service's distribute()"  # tfperf inserts it at the cut (--service)
    DATALOADER = "a DataLoader argument"  # tfperf rebuilds `make_loader`'s DataLoader with it
    TRAINER = "tfperf in the training process"  # e.g. `torch.set_num_threads`


class Step(int, Enum):
    """Where, in a typical pipeline, the call a code knob is an argument of sits: the order of
    the lines of `tfperf.report`'s tf.data snippet."""

    READ = 1
    INTERLEAVE = 2
    SHUFFLE = 3
    MAP = 4
    BATCH = 5
    PREFETCH = 6


@dataclasses.dataclass(frozen=True)
class SearchContext:
    """What a knob's search domain depends on, besides the baseline's value.

    Attributes:
        cpu_count: logical CPU cores of the machine the trials run on.
        has_gpu: whether a GPU is visible to them.
        cpu_bf16: whether the CPU computes bfloat16 natively.
        distributed: whether the trials run under a `tf.distribute` strategy.
        service: whether the trials read through a tf.data service cluster (`--service`).
    """

    cpu_count: int
    has_gpu: bool
    cpu_bf16: bool
    distributed: bool = False
    service: bool = False


@dataclasses.dataclass(frozen=True)
class Snippet:
    """A line of ready-to-paste code that carries a knob's value.

    `template` is formatted with `value` (AUTOTUNE as `tf.data.AUTOTUNE`); the line is left
    out when the value is one of `unless` (it would do nothing).
    """

    template: str
    step: Step | None = None
    unless: tuple[Any, ...] = ()


#: A knob's search domain before the pipeline model: `(baseline value, context) -> values`.
#: An empty list keeps the baseline's value alone.
Search = Callable[[Any, SearchContext], list[Any]]


@dataclasses.dataclass(frozen=True)
class Knob:
    """Everything tfperf knows about one knob.

    Attributes:
        name: the field of `Knobs` (filled in from the field's name).
        default: its value when neither `BASELINE` nor a trial sets it.
        kind: how a value is checked.
        doc: what it is, its unit, and what `None` means.
        applied_by: who puts its value into effect.
        option: the attribute path it sets. For `Applier.TF_DATA`, on `tf.data.Options`
            ("threading.private_threadpool_size"), and tfperf sets and reads it by this path
            alone. For a strategy knob, on `tf.distribute.InputOptions` or `tf.data.Options`,
            for the reader: `frameworks.tensorflow` applies those by name. For
            `Applier.DATALOADER`, the `DataLoader` argument it is. None for the others.
        changes_training: whether it changes what the model learns, not only speed; such a
            knob says in `training_note` what to check when a recommendation changes it
            (`{old}` and `{new}` are its values).
        check_note: for a knob that changes speed alone in most pipelines but what training
            sees in some, the one sentence on what to check when a recommendation or patch
            turns it on (sets it true where the baseline did not); None: nothing to check.
        autotune: whether the everything-AUTOTUNE reference trial sets it to AUTOTUNE.
        unset: what the runtime does when it is None, in a report's words; None when the
            report says only "not set".
        search: its domain in a search before the pipeline model.
        snippet: the code line that carries it, for code that does not read knobs.
        edit: the manual edit, for a zero-change patch, that applies what tfperf applied
            itself; `{value}` is the value. Options knobs share one generated edit.
        frameworks: the frameworks (`tfperf.frameworks` names) whose pipelines it acts in:
            a search of a tf.data pipeline never holds a DataLoader's knobs, nor the reverse.
        call: the call and argument it is in the user's code, `("shuffle", "buffer_size")`:
            a call site of that argument takes its domain, and the buffer that call holds
            grows with it (the RAM model).
        needs_workers: a `DataLoader` argument that acts only with worker processes: with
            none, torch refuses any value but its default, so tfperf puts that back.
    """

    default: Any
    kind: Kind
    doc: str
    applied_by: Applier
    name: str = ""
    option: str | None = None
    changes_training: bool = False
    training_note: str | None = None
    check_note: str | None = None
    autotune: bool = False
    unset: str | None = None
    search: Search | None = None
    snippet: Snippet | None = None
    edit: str | None = None
    frameworks: frozenset[str] = TENSORFLOW
    call: tuple[str, str] | None = None
    needs_workers: bool = False

    def __post_init__(self) -> None:
        if self.applied_by is Applier.TF_DATA and self.option is None:
            raise ValueError(
                f"knob {self.name or self.doc!r} is applied as a tf.data option, so it needs "
                "`option`, its attribute path on tf.data.Options, e.g. "
                '"threading.private_threadpool_size".'
            )

        if self.changes_training != (self.training_note is not None):
            raise ValueError(
                f"knob {self.name or self.doc!r}: a knob that changes training needs a "
                "`training_note` saying what to check, and only such a knob has one, but got "
                f"(changes_training={self.changes_training}, training_note="
                f"{self.training_note!r})."
            )

    @property
    def site_kind(self) -> SiteKind | None:
        """What its `call`'s argument controls (`TUNABLE`), e.g. `SiteKind.PARALLELISM`."""
        entry = TUNABLE.get(self.call) if self.call is not None else None
        return entry[0] if entry is not None else None

    def domain(self, baseline: Any, context: SearchContext) -> list[Any]:
        """The values a search tries before the pipeline model; empty: the baseline alone."""
        return self.search(baseline, context) if self.search is not None else []

    def option_snippet(self, value: Any) -> str:
        """The line setting this tf.data option on an `options = tf.data.Options()`."""
        return f"options.{self.option} = {value}"


def knob(default: Any, kind: Kind, doc: str, **facts: Any) -> Any:
    """Declares one knob as a field of `Knobs`: its default, check, doc and `Knob` facts."""
    return dataclasses.field(default=default, metadata={"knob": Knob(default, kind, doc, **facts)})


def loader_knob(kind: Kind, argument: str, doc: str, search: Search | None, **facts: Any) -> Any:
    """Declares a PyTorch `DataLoader` argument as a knob: tfperf rebuilds `make_loader`'s
    DataLoader with it, and None (its default) keeps what `make_loader` wrote."""
    facts.setdefault("unset", "as make_loader wrote it")
    return knob(
        None,
        kind,
        f"DataLoader `{argument}`: {doc}",
        applied_by=Applier.DATALOADER,
        option=argument,
        call=("DataLoader", argument),
        search=search,
        frameworks=TORCH,
        **facts,
    )


def choices(*values: Any) -> Search:
    """The same values on every machine."""
    return lambda _value, _context: list(values)


def distributed_choices(*values: Any) -> Search:
    """`values` under a strategy; the baseline's value alone otherwise."""
    return lambda _value, context: list(values) if context.distributed else []


def service_choices(*values: Any) -> Search:
    """`values` when the trials read through tf.data service; the baseline's alone otherwise."""
    return lambda _value, context: list(values) if context.service else []


def gpu_choices(*values: Any) -> Search:
    """`values` with a GPU; the baseline's value alone without one."""
    return lambda _value, context: list(values) if context.has_gpu else []


def scaled_values(factors: Iterable[float]) -> Search:
    """The baseline's value times each factor, at least 1."""
    kept = tuple(factors)
    return lambda value, _context: _scaled(value, kept)


def parallelism_values(_value: Any, context: SearchContext) -> list[Any]:
    """Powers of two from 1 to `max(8, 4 * cpu_count)`, `cpu_count` and AUTOTUNE."""
    return [*parallelism_counts(context.cpu_count), AUTOTUNE]


def prefetch_values(_value: Any, _context: SearchContext) -> list[Any]:
    """`PREFETCH_DEPTHS` batches and AUTOTUNE."""
    return [*PREFETCH_DEPTHS, AUTOTUNE]


def worker_values(_value: Any, context: SearchContext) -> list[Any]:
    """None (as written), no workers, and powers of two up to `max(32, 4 * cpu_count)` with
    `cpu_count`: workers that block on reads help well past the core count."""
    counts = powers_of_two(1, max(_MIN_WORKER_CAP, 4 * context.cpu_count))
    return [None, *sorted({0, *counts, context.cpu_count})]


def trainer_thread_values(_value: Any, context: SearchContext) -> list[Any]:
    """None (torch's default: one per core), one thread, half the cores and every core: the
    trainer's threads and the loader's workers share the cores."""
    return [None, *sorted({1, max(1, context.cpu_count // 2), context.cpu_count})]


def pool_values(_value: Any, context: SearchContext) -> list[Any]:
    """The shared pool (None), one thread per core and two."""
    return [None, context.cpu_count, 2 * context.cpu_count]


def precision_values(_value: Any, context: SearchContext) -> list[Any]:
    """float32; mixed_bfloat16 with a GPU or a CPU that computes bf16 natively (elsewhere it
    is emulated and slower); mixed_float16 only with a GPU, as CPUs gain nothing from it."""
    precisions = [Precision.FLOAT32]
    if context.has_gpu or context.cpu_bf16:
        precisions.append(Precision.MIXED_BFLOAT16)
    if context.has_gpu:
        precisions.append(Precision.MIXED_FLOAT16)
    return precisions


def parallelism_counts(cpu_count: int) -> list[int]:
    """Powers of two from 1 up to `max(8, 4 * cpu_count)`, and `cpu_count`, ascending."""
    return sorted({*powers_of_two(1, max(_MIN_PARALLELISM_CAP, 4 * cpu_count)), cpu_count})


def _scaled(base: int, factors: Iterable[float]) -> list[int]:
    return sorted({max(1, round(base * factor)) for factor in factors})


def powers_of_two(low: int, high: int) -> list[int]:
    """The powers of two from `low` to `high`, ascending."""
    powers, power = [], 1
    while power <= high:
        if power >= low:
            powers.append(power)
        power *= 2
    return powers
