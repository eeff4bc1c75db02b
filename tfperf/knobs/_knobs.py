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
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from tfperf.errors import KnobError
from tfperf.knobs._choices import (
    Precision,
    ProcessingMode,
    ServiceCompression,
    ShardPolicy,
    StartMethod,
    TargetWorkers,
)
from tfperf.knobs._declare import (
    BATCH_FACTORS,
    EVERY_FRAMEWORK,
    SHUFFLE_FACTORS,
    TORCH,
    Applier,
    Kind,
    Knob,
    Snippet,
    Step,
    choices,
    distributed_choices,
    gpu_choices,
    knob,
    loader_knob,
    parallelism_values,
    pool_values,
    precision_values,
    prefetch_values,
    scaled_values,
    service_choices,
    trainer_thread_values,
    worker_values,
)
from tfperf.knobs._sitename import AUTOTUNE, SiteValues, check_site_value, is_site_name
from tfperf.knobs._values import bad_value, check_kind, plain_value

#: The field holding the call-site values.
SITES = "sites"


@dataclasses.dataclass(frozen=True)
class Knobs:
    """Input-pipeline and training settings for one measured configuration.

    Parallelism-like knobs accept `AUTOTUNE` (the same value as `tf.data.AUTOTUNE`), which lets
    the tf.data runtime choose. `None` on the tri-state options means "leave tf.data's default".
    The defaults follow the tf.data performance guide; a pipeline file's `BASELINE` overrides them.

    Each field is a knob's one declaration (`knob(...)`, `loader_knob(...)` for a DataLoader
    argument; see `tfperf.knobs._declare.Knob`): a new field is searched, applied, reported,
    snippeted and patched with no other change.
    """

    batch_size: int = knob(
        32,
        Kind.POSITIVE_INT,
        "Examples per batch.",
        applied_by=Applier.CODE,
        call=("batch", "batch_size"),
        changes_training=True,
        training_note="The winner changes the batch size ({old} → {new}): the learning rate "
        "and convergence may need retuning. Check accuracy before adopting it.",
        search=scaled_values(BATCH_FACTORS),
        snippet=Snippet("ds = ds.batch({value})", Step.BATCH),
        frameworks=EVERY_FRAMEWORK,
    )
    shuffle_buffer: int = knob(
        1024,
        Kind.POSITIVE_INT,
        "Elements held by `shuffle(buffer_size)`; host RAM grows with it.",
        applied_by=Applier.CODE,
        call=("shuffle", "buffer_size"),
        changes_training=True,
        training_note="The winner changes the shuffle buffer ({old} → {new}): examples are "
        "mixed less (or more) thoroughly, which can affect accuracy.",
        unset="no shuffle",
        search=scaled_values(SHUFFLE_FACTORS),
        snippet=Snippet("ds = ds.shuffle({value})", Step.SHUFFLE),
    )
    num_parallel_calls: int | None = knob(
        AUTOTUNE,
        Kind.OPTIONAL_PARALLELISM,
        "Parallel invocations of `map(num_parallel_calls=...)`; None: one at a time.",
        applied_by=Applier.CODE,
        call=("map", "num_parallel_calls"),
        autotune=True,
        search=parallelism_values,
        unset="sequential",
        snippet=Snippet("ds = ds.map(parse, num_parallel_calls={value})", Step.MAP),
    )
    cycle_length: int | None = knob(
        AUTOTUNE,
        Kind.OPTIONAL_PARALLELISM,
        "Input elements `interleave(cycle_length=...)` reads at once; None: one per CPU core.",
        applied_by=Applier.CODE,
        call=("interleave", "cycle_length"),
        autotune=True,
        search=parallelism_values,
        unset="the number of CPU cores",
        # tf.data refuses interleave parallelism above a fixed cycle_length: keep them equal.
        snippet=Snippet(
            "ds = files.interleave(read, cycle_length={value}, num_parallel_calls={value})"
            "  # if you interleave",
            Step.INTERLEAVE,
        ),
    )
    num_parallel_reads: int | None = knob(
        AUTOTUNE,
        Kind.OPTIONAL_PARALLELISM,
        "Files read at once, e.g. `TFRecordDataset(num_parallel_reads)`; None: one at a time.",
        applied_by=Applier.CODE,
        call=("TFRecordDataset", "num_parallel_reads"),
        autotune=True,
        search=parallelism_values,
        unset="sequential",
        snippet=Snippet(
            "ds = tf.data.TFRecordDataset(files, num_parallel_reads={value})", Step.READ
        ),
    )
    prefetch: int = knob(
        AUTOTUNE,
        Kind.BUFFER,
        "Batches buffered by `prefetch(buffer_size)`; 0 means no prefetch.",
        applied_by=Applier.CODE,
        call=("prefetch", "buffer_size"),
        autotune=True,
        unset="no prefetch of its own",
        search=prefetch_values,
        snippet=Snippet("ds = ds.prefetch({value})", Step.PREFETCH, unless=(0,)),
    )
    mixed_precision: Precision = knob(  # noqa: RUF009 (`knob` returns a dataclasses.field)
        Precision.FLOAT32,
        Kind.PRECISION,
        "Keras global policy tfperf sets before `make_model`.",
        applied_by=Applier.PRECISION,
        changes_training=True,
        training_note="The winner changes the precision ({old} → {new}): numerics change. "
        "Check accuracy (and loss scaling for float16) before adopting it.",
        unset="float32",
        search=precision_values,
        snippet=Snippet(
            'keras.mixed_precision.set_global_policy("{value}")', unless=(Precision.FLOAT32,)
        ),
        edit='Add keras.mixed_precision.set_global_policy("{value}") before the model is built.',
        # For a DataLoader pipeline tfperf runs the train step under `torch.autocast`.
        frameworks=EVERY_FRAMEWORK,
    )
    deterministic: bool | None = knob(
        None,
        Kind.OPTIONAL_BOOL,
        "tf.data `Options.deterministic`, applied by tfperf; None keeps tf.data's default (True).",
        applied_by=Applier.TF_DATA,
        option="deterministic",
        unset="deterministic",
        # False lets parallel stages hand out whichever element is ready first.
        search=choices(None, False),
    )
    private_threadpool_size: int | None = knob(
        None,
        Kind.OPTIONAL_THREADS,
        "tf.data `threading.private_threadpool_size`, set by tfperf; None uses the shared pool.",
        applied_by=Applier.TF_DATA,
        option="threading.private_threadpool_size",
        unset="the shared thread pool",
        search=pool_values,
    )
    auto_shard_policy: ShardPolicy | None = knob(  # noqa: RUF009 (see `mixed_precision`)
        None,
        Kind.SHARD_POLICY,
        "tf.data `experimental_distribute.auto_shard_policy` under a strategy; None keeps "
        "tf.data's default (auto). Acts only with more than one input worker.",
        applied_by=Applier.STRATEGY,
        option="experimental_distribute.auto_shard_policy",
        # Never acts in a single-machine trial: only a SEARCH_SPACE searches it.
        search=None,
    )
    fetch_to_device: bool | None = knob(
        None,
        Kind.OPTIONAL_BOOL,
        "`tf.distribute.InputOptions.experimental_fetch_to_device` under a strategy: prefetch "
        "batches onto the replicas' devices; None keeps TensorFlow's default (True).",
        applied_by=Applier.STRATEGY,
        option="experimental_fetch_to_device",
        search=distributed_choices(None, False),
    )
    per_replica_buffer_size: int | None = knob(
        None,
        Kind.OPTIONAL_THREADS,
        "`tf.distribute.InputOptions.experimental_per_replica_buffer_size` under a strategy: "
        "batches prefetched per replica device; None keeps TensorFlow's default (1).",
        applied_by=Applier.STRATEGY,
        option="experimental_per_replica_buffer_size",
        search=distributed_choices(None, 2, 4),
    )
    gpu_memory_growth: bool | None = knob(
        None,
        Kind.OPTIONAL_BOOL,
        "TensorFlow GPU memory growth (`tf.config.experimental.set_memory_growth`), set by "
        "tfperf before TensorFlow starts its GPUs; None keeps tfperf's default (growth on in "
        "the processes it measures). A `--gpu-memory-limit` overrides it.",
        applied_by=Applier.PROCESS,
        # Growth changes fragmentation and the peak; without a GPU it does nothing.
        search=gpu_choices(None, False),
        snippet=Snippet(
            'for gpu in tf.config.list_physical_devices("GPU"):  # before TensorFlow uses the '
            "GPU\n    tf.config.experimental.set_memory_growth(gpu, {value})",
            unless=(None,),
        ),
        edit="Add tf.config.experimental.set_memory_growth(gpu, {value}) for each GPU in "
        'tf.config.list_physical_devices("GPU"), before TensorFlow first uses it.',
    )
    service: str | None = knob(
        None,
        Kind.SERVICE_ADDRESS,
        "The tf.data service dispatcher the input is read through (`--service`); None: the "
        "input runs in the training process.",
        applied_by=Applier.SERVICE,
        unset="no service",
        search=None,  # where the cluster is, not a setting to search
    )
    service_processing_mode: ProcessingMode | None = knob(  # noqa: RUF009 (see `mixed_precision`)
        None,
        Kind.PROCESSING_MODE,
        "`distribute(processing_mode=...)` under `--service`; None: parallel_epochs.",
        applied_by=Applier.SERVICE,
        changes_training=True,
        training_note="The winner changes the service's processing mode ({old} → {new}): "
        "with several workers, parallel_epochs repeats every example once per worker in an "
        "epoch, distributed_epoch visits each once. Check what an epoch means for your "
        "training before adopting it.",
        unset="parallel_epochs",
        search=service_choices(None, ProcessingMode.DISTRIBUTED_EPOCH),
    )
    service_compression: ServiceCompression | None = knob(  # noqa: RUF009 (see `mixed_precision`)
        None,
        Kind.SERVICE_COMPRESSION,
        "`distribute(compression=...)` under `--service`: auto compresses with snappy; None "
        "keeps tf.data's default (auto).",
        applied_by=Applier.SERVICE,
        unset="auto",
        search=service_choices(None, ServiceCompression.NONE),
    )
    service_max_outstanding_requests: int | None = knob(
        None,
        Kind.OPTIONAL_THREADS,
        "`distribute(max_outstanding_requests=...)` under `--service`: element requests in "
        "flight; None lets tf.data choose.",
        applied_by=Applier.SERVICE,
        unset="tf.data's choice",
        search=service_choices(None, 1, 4, 16),
    )
    service_target_workers: TargetWorkers | None = knob(  # noqa: RUF009 (see `mixed_precision`)
        None,
        Kind.TARGET_WORKERS,
        "`distribute(target_workers=...)` under `--service`; None keeps tf.data's default (auto).",
        applied_by=Applier.SERVICE,
        unset="auto",
        # LOCAL fails without a worker on the trainer's host: only a SEARCH_SPACE tries it.
        search=service_choices(None, TargetWorkers.ANY),
    )
    service_job_name: str | None = knob(
        None,
        Kind.JOB_NAME,
        "`distribute(job_name=...)` under `--service`: trainers giving one name share one "
        "job; None: a job of this trainer's own.",
        applied_by=Applier.SERVICE,
        unset="a job of its own",
        search=None,  # shared jobs are a choice about training, not speed
    )
    num_workers: int | None = loader_knob(
        Kind.OPTIONAL_COUNT,
        "num_workers",
        "worker processes loading items; 0 loads them in the trainer. None keeps what "
        "`make_loader` wrote.",
        worker_values,
    )
    prefetch_factor: int | None = loader_knob(
        Kind.OPTIONAL_THREADS,
        "prefetch_factor",
        "batches each worker loads ahead; acts only with workers. None keeps what "
        "`make_loader` wrote (PyTorch's default: 2).",
        choices(None, 1, 2, 4, 8),
        needs_workers=True,
    )
    persistent_workers: bool | None = loader_knob(
        Kind.OPTIONAL_BOOL,
        "persistent_workers",
        "keep the workers alive between epochs instead of starting them at each; acts only "
        "with workers. None keeps what `make_loader` wrote.",
        choices(None, True),
        needs_workers=True,
        # Not input-only in every pipeline: kept workers keep their dataset copies, and an
        # epoch's `iter(loader)` no longer draws the workers' base seed from the global RNG.
        check_note="persistent_workers keeps each worker's copy of the dataset and its random "
        "state across epochs, and an epoch no longer draws the workers' seed from the global "
        "RNG: check that per-epoch state (set_epoch, augmentation seeds) still reaches the "
        "workers and changes each epoch.",
    )
    pin_memory: bool | None = loader_knob(
        Kind.OPTIONAL_BOOL,
        "pin_memory",
        "page-locked batches, copied to a GPU asynchronously; acts only with CUDA. None keeps "
        "what `make_loader` wrote.",
        gpu_choices(None, True),
    )
    in_order: bool | None = loader_knob(
        Kind.OPTIONAL_BOOL,
        "in_order",
        "False hands out whichever worker's batch is ready first, where the installed torch "
        "accepts it. None keeps what `make_loader` wrote.",
        choices(None, False),
    )
    worker_start_method: StartMethod | None = loader_knob(  # noqa: RUF009 (see `mixed_precision`)
        Kind.START_METHOD,
        "multiprocessing_context",
        "how workers start. None keeps what `make_loader` wrote (the platform's default: fork "
        "on Linux).",
        # Only a SEARCH_SPACE searches it: spawned workers import the dataset's module again,
        # which a pipeline file loaded by tfperf under a private name cannot offer them.
        None,
        unset="the platform's default",
    )
    torch_threads: int | None = knob(
        None,
        Kind.OPTIONAL_THREADS,
        "`torch.set_num_threads` in the trainer: threads of the train step's operators, "
        "which share the cores with the workers. None keeps torch's default (one per core).",
        applied_by=Applier.TRAINER,
        unset="one per core",
        snippet=Snippet("torch.set_num_threads({value})", unless=(None,)),
        search=trainer_thread_values,
        frameworks=TORCH,
    )
    sites: SiteValues = dataclasses.field(
        default=SiteValues(),
        metadata={
            "kind": Kind.SITES,
            "doc": "Values tfperf passes instead of those written at call sites in the user's "
            "code, e.g. `{'map@pipeline.py:23.num_parallel_calls': 8}`; empty for a file that "
            "reads knobs.",
        },
    )

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = check_kind(field.name, _kind(field), getattr(self, field.name))
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

    def value_of(self, name: str) -> Any:
        """The value of the knob `name`, or of the call site so named (None: a site these
        knobs do not hold), the name `replace` takes."""
        return self.sites.get(name) if is_site_name(name) else getattr(self, name)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values (the precision as its string); `sites` only when set, and
        a DataLoader's or trainer's knob only when set (unset, it changes nothing)."""
        values = {
            name: plain_value(getattr(self, name))
            for name in self.names()
            if getattr(self, name) is not None or name not in _SET_ONLY
        }
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
    known = KNOBS.names()
    unknown = [
        name for name in values if name not in known and name != SITES and not is_site_name(name)
    ]
    if unknown:
        raise KnobError(
            f"{source}: unknown knob name{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(repr(n) for n in unknown)}. Valid names: {', '.join(known)}."
        )


def check_value(name: str, value: Any) -> Any:
    """Validates one value for knob `name` and returns it normalised (e.g. 'AUTOTUNE' -> -1).

    `name` may be a call site (`map@pipeline.py:23.num_parallel_calls`).
    """
    check_names({name: value}, source="knob")
    if is_site_name(name):
        return check_site_value(name, value)
    return check_kind(name, KNOBS[name].kind, value)


class Registry:
    """The knobs' declarations, read from the fields of `record` (a `Knobs` class).

    Every table tfperf keeps about knobs is derived from here, so a knob declared as one more
    field of `Knobs` is searched, applied, reported, snippeted and patched. A test may point
    `record` at a subclass of `Knobs` with a field of its own, e.g.
    `monkeypatch.setattr(KNOBS, "record", ExtendedKnobs)`.
    """

    def __init__(self, record: type[Knobs]) -> None:
        self.record = record

    def __iter__(self) -> Iterator[Knob]:
        """Every declaration, in field order."""
        return iter(_declarations(self.record))

    def __getitem__(self, name: str) -> Knob:
        """The declaration of knob `name`.

        Raises:
            KnobError: `name` is not a knob (the message lists the valid names).
        """
        for declared in self:
            if declared.name == name:
                return declared
        check_names({name: None}, source="knob")
        raise KnobError(f"knob {name!r} is a call site, which has no declaration of its own.")

    def __getattr__(self, name: str) -> Knob:
        """The declaration of knob `name` as an attribute: `KNOBS.batch_size.name`."""
        if name.startswith("_") or name == "record":
            raise AttributeError(name)
        for declared in self:
            if declared.name == name:
                return declared
        raise AttributeError(f"no knob {name!r}; knobs: {', '.join(self.names())}")

    def names(self) -> tuple[str, ...]:
        """The knob names, in declaration order."""
        return tuple(declared.name for declared in self)

    def applied_by(self, *appliers: Applier) -> tuple[Knob, ...]:
        """The declarations of the knobs one of `appliers` puts into effect."""
        return tuple(declared for declared in self if declared.applied_by in appliers)

    def where(self, test: Callable[[Knob], bool]) -> tuple[str, ...]:
        """The names of the knobs whose declaration passes `test`, in declaration order."""
        return tuple(declared.name for declared in self if test(declared))


def _declarations(record: type[Knobs]) -> tuple[Knob, ...]:
    # Read once per class: every check of a value looks its knob up here.
    if record not in _DECLARED:
        fields = dataclasses.fields(record)
        found = ((field.name, field.metadata.get("knob")) for field in fields)
        _DECLARED[record] = tuple(
            dataclasses.replace(knob, name=name) for name, knob in found if knob is not None
        )
    return _DECLARED[record]


_DECLARED: dict[type[Knobs], tuple[Knob, ...]] = {}


#: The declarations of every knob: the one place any table about knobs is derived from.
KNOBS = Registry(Knobs)


#: Knobs a record holds only when set: unset, a DataLoader keeps what `make_loader` wrote, the
#: trainer its default and the input runs without tf.data service, so leaving them out keeps
#: a tf.data record as it always was.
_SET_ONLY = frozenset(
    KNOBS.where(lambda k: k.applied_by in (Applier.DATALOADER, Applier.TRAINER, Applier.SERVICE))
)

#: Knobs that only the user's code applies, by reading them in `make_dataset(knobs)`. A
#: pipeline whose code takes no knobs (a plain `make_dataset()`, a script) tunes the values
#: written in its calls instead, as `Knobs.sites`.
CODE_KNOBS = KNOBS.where(lambda knob: knob.applied_by is Applier.CODE)
#: Knobs that act only under a `tf.distribute` strategy (see docs/multi-device.md): tfperf
#: applies them when it distributes the dataset, and the tuner searches them only then.
STRATEGY_KNOBS = KNOBS.where(lambda knob: knob.applied_by is Applier.STRATEGY)
#: Knobs that act only when the input is read through tf.data service (`--service`, see
#: docs/offload.md): tfperf passes them to the `distribute()` it inserts.
SERVICE_KNOBS = KNOBS.where(lambda knob: knob.applied_by is Applier.SERVICE)


def framework_knobs(framework: str) -> tuple[str, ...]:
    """The knobs that act in a pipeline of `framework` (a `tfperf.frameworks` name)."""
    return KNOBS.where(lambda knob: framework in knob.frameworks)


def _with_sites(values: Mapping[str, Any], sites: SiteValues) -> dict[str, Any]:
    """`values` with call-site names (and a `sites` mapping) merged into `sites`."""
    plain = {name: value for name, value in values.items() if not is_site_name(name)}
    given = plain.pop(SITES, None)
    if given is not None and not isinstance(given, Mapping):
        raise bad_value(SITES, given, Kind.SITES)
    changes = {**(given or {}), **{n: v for n, v in values.items() if is_site_name(n)}}
    if changes or given is not None:
        plain[SITES] = (sites if given is None else SiteValues()).updated(changes)
    return plain


def _kind(field: dataclasses.Field[Any]) -> Kind:
    declared = field.metadata.get("knob")
    kind: Kind = declared.kind if declared is not None else field.metadata["kind"]
    return kind
