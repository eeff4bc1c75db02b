"""Training under a `tf.distribute.Strategy`: distributed input and a step run on every replica.

The profiler times each step as "wait for the next batch, then compute". Under a strategy the
next batch comes from the distributed dataset's iterator (per-replica values, prefetched to the
replicas' devices), and the step runs with `strategy.run` on every replica, then reduces. So
the wait still shows whether input keeps up with all replicas together.

`DistributedInput` is re-iterable like a dataset (the profiler restarts finite data) and yields
`DistributedBatch` objects: the per-replica values for the step, and a `shape` whose leading
dimension is the global batch, which is how the profiler counts a batch's examples.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

from tfperf.errors import PipelineFileError
from tfperf.knobs import Knobs, ShardPolicy


@dataclasses.dataclass(frozen=True)
class DistributedBatch:
    """One step's input under a strategy.

    Attributes:
        values: what the distributed iterator yielded (per-replica values), for `strategy.run`.
        shape: the global batch's leading dimension first, then the first component's other
            dimensions: the profiler reads a batch's examples and shape from it.
    """

    values: Any
    shape: tuple[int | None, ...]

    @property
    def examples(self) -> int:
        return int(self.shape[0] or 0)


class DistributedInput:
    """A distributed dataset that iterates as `DistributedBatch` objects, restartable."""

    def __init__(
        self, strategy: Any, distributed: Any, dataset: Any, *, from_function: bool = False
    ) -> None:
        self.strategy = strategy
        self.distributed = distributed
        #: Built by `distribute_datasets_from_function` (per-replica batches), not split.
        self.from_function = from_function
        #: The tf.data pipeline that feeds it (one input pipeline's, for the from-function
        #: form): what stage analysis and AUTOTUNE read-outs look at.
        self.dataset = dataset

    def __iter__(self) -> Iterator[DistributedBatch]:
        return _batches(self.strategy, iter(self.distributed))


def _batches(strategy: Any, iterator: Iterator[Any]) -> Iterator[DistributedBatch]:
    for values in iterator:
        yield DistributedBatch(values, _global_shape(strategy, values))


def _global_shape(strategy: Any, values: Any) -> tuple[int | None, ...]:
    import tensorflow as tf

    leaves = tf.nest.flatten(values, expand_composites=False)
    if not leaves:
        return (1,)
    local = strategy.experimental_local_results(leaves[0])
    shapes = [tuple(getattr(part, "shape", ())) for part in local]
    if not shapes or not shapes[0]:
        return (len(local),)
    total = sum(int(shape[0] or 0) for shape in shapes)
    return (total, *(None if d is None else int(d) for d in shapes[0][1:]))


def is_default(strategy: Any) -> bool:
    """Whether `strategy` is TensorFlow's default strategy, i.e. no distribution.

    Call it outside any `strategy.scope()`: there `tf.distribute.get_strategy()` is the default.
    """
    import tensorflow as tf

    return not tf.distribute.has_strategy() and strategy is tf.distribute.get_strategy()


class _Nothing:
    """A context manager that does nothing (`in_scope` without a strategy)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def check_strategy(value: Any, file_name: str) -> None:
    """Raises `PipelineFileError` unless `value` is a `tf.distribute.Strategy`."""
    import tensorflow as tf

    if isinstance(value, tf.distribute.Strategy):
        return
    found = "None" if value is None else f"a {type(value).__name__}"
    raise PipelineFileError(
        f"{file_name}: make_strategy() returned {found}, not a tf.distribute.Strategy. Return "
        "one, e.g. `return tf.distribute.MirroredStrategy()`, or remove make_strategy to train "
        "without one."
    )


def in_scope(strategy: Any | None) -> Any:
    """`strategy.scope()`, or a context that does nothing without a strategy."""
    return strategy.scope() if strategy is not None else _Nothing()


def input_options(knobs: Knobs) -> Any:
    """The `tf.distribute.InputOptions` the strategy knobs ask for (TensorFlow's defaults
    where a knob is None)."""
    import tensorflow as tf

    settings: dict[str, Any] = {}
    if knobs.fetch_to_device is not None:
        settings["experimental_fetch_to_device"] = knobs.fetch_to_device
    if knobs.per_replica_buffer_size is not None:
        settings["experimental_per_replica_buffer_size"] = knobs.per_replica_buffer_size
    return tf.distribute.InputOptions(**settings)


def shard_dataset(dataset: Any, knobs: Knobs) -> Any:
    """`dataset` with the knobs' auto-shard policy set (unchanged when it is None)."""
    import tensorflow as tf

    if knobs.auto_shard_policy is None:
        return dataset
    policies = {
        ShardPolicy.AUTO: tf.data.experimental.AutoShardPolicy.AUTO,
        ShardPolicy.FILE: tf.data.experimental.AutoShardPolicy.FILE,
        ShardPolicy.DATA: tf.data.experimental.AutoShardPolicy.DATA,
        ShardPolicy.OFF: tf.data.experimental.AutoShardPolicy.OFF,
    }
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = policies[knobs.auto_shard_policy]
    return dataset.with_options(options)


def distribute_dataset(strategy: Any, dataset: Any, knobs: Knobs) -> DistributedInput:
    """`strategy.experimental_distribute_dataset`: global batches split across the replicas."""
    dataset = shard_dataset(dataset, knobs)
    distributed = strategy.experimental_distribute_dataset(dataset, options=input_options(knobs))
    return DistributedInput(strategy, distributed, dataset)


def default_input_context() -> Any:
    """The `InputContext` of one input pipeline feeding one replica: the global batch."""
    import tensorflow as tf

    return tf.distribute.InputContext()


def distribute_from_function(
    strategy: Any, make: Callable[[Any], Any], knobs: Knobs
) -> DistributedInput:
    """`strategy.distribute_datasets_from_function(make)`, `make` taking an `InputContext`.

    `make` returns one input pipeline's dataset, batched per replica; the first one built is
    kept as the pipeline the profile analyses.
    """
    built: list[Any] = []

    def dataset_fn(context: Any) -> Any:
        dataset = shard_dataset(make(context), knobs)
        built.append(dataset)
        return dataset

    distributed = strategy.distribute_datasets_from_function(
        dataset_fn, options=input_options(knobs)
    )
    if not built:  # built lazily by this TensorFlow: build one pipeline for the analysis
        import tensorflow as tf

        dataset_fn(
            tf.distribute.InputContext(
                num_input_pipelines=1,
                input_pipeline_id=0,
                num_replicas_in_sync=strategy.num_replicas_in_sync,
            )
        )
    return DistributedInput(strategy, distributed, built[0], from_function=True)


def strategy_step(strategy: Any, step: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A step that runs the user's `step` on every replica (`strategy.run`) and reduces.

    Floating-point outputs are averaged over the replicas; others are returned per replica.
    """
    import tensorflow as tf

    def reduce(value: Any) -> Any:
        dtype = getattr(value, "dtype", None)
        if dtype is not None and getattr(dtype, "is_floating", False):
            return strategy.reduce(tf.distribute.ReduceOp.MEAN, value, axis=None)
        return strategy.experimental_local_results(value)

    def per_step(values: Any) -> Any:
        outputs = strategy.run(step, args=(values,))
        return tf.nest.map_structure(reduce, outputs)

    distributed = tf.function(per_step)

    def run(batch: DistributedBatch) -> Any:
        return distributed(batch.values)

    return run


def keras_distributed_step(model: Any) -> Callable[[Any], Any]:
    """A train step for a compiled Keras model built under a strategy, as `fit` runs it.

    Keras' own train function runs `model.train_step` with `strategy.run` on each replica
    and reduces the logs. The first call builds the model, its optimizer and metrics (as
    `fit` does) from one replica's share of the batch.
    """
    strategy = model.distribute_strategy
    built = [False]

    def run(batch: DistributedBatch) -> Any:
        if not built[0]:
            local = _first_replica(strategy, batch.values)
            model._maybe_symbolic_build(data_batch=_with_weights(local))
            model.make_train_function()
            built[0] = True
        return model.train_function([batch.values])

    return run


def _first_replica(strategy: Any, values: Any) -> Any:
    import tensorflow as tf

    return tf.nest.map_structure(lambda v: strategy.experimental_local_results(v)[0], values)


def _with_weights(batch: Any) -> Any:
    """`(x, y, sample_weight)` from a batch, as Keras' symbolic build takes it."""
    import keras

    return keras.utils.unpack_x_y_sample_weight(batch)


def replica_devices(strategy: Any) -> list[str]:
    """The devices the strategy's replicas run on (`extended.worker_devices`)."""
    devices = getattr(strategy.extended, "worker_devices", None)
    return [str(device) for device in devices] if devices else []
