"""Pins every private TensorFlow name tfperf uses against the installed TensorFlow.

`tfperf.frameworks.tensorflow._tf` is the one place tfperf touches tf.data's private classes,
attributes and modules. Each test here checks one of them on real datasets, so a TensorFlow
upgrade that moves one fails here, by name, instead of a stage label or a call site going
quietly wrong.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

from tfperf.frameworks.tensorflow import _tf
from tfperf.frameworks.tensorflow._tf import _intercept, patched
from tfperf.knobs import TUNABLE
from tfperf.results.stages import StageKind

tf = pytest.importorskip("tensorflow")


def _generator():
    yield 1


def _records(tmp_path: Path) -> str:
    path = str(tmp_path / "data.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(b"x")
    return path


def _text(tmp_path: Path) -> str:
    path = tmp_path / "data.csv"
    path.write_text("a,1\n")
    return str(path)


R = tf.data.Dataset.range
#: Method name -> a small real dataset whose outermost object that call made.
BUILDERS = {
    "range": lambda tmp: R(4),
    "from_tensor_slices": lambda tmp: tf.data.Dataset.from_tensor_slices([1, 2]),
    "from_tensors": lambda tmp: tf.data.Dataset.from_tensors(1),
    "from_sparse_tensor_slices": lambda tmp: (
        tf.compat.v1.data.Dataset.from_sparse_tensor_slices(
            tf.sparse.SparseTensor([[0, 0]], [1], [2, 2])
        )._dataset
    ),
    "TFRecordDataset": lambda tmp: tf.data.TFRecordDataset(_records(tmp)),
    "TextLineDataset": lambda tmp: tf.data.TextLineDataset(_text(tmp)),
    "FixedLengthRecordDataset": lambda tmp: tf.data.FixedLengthRecordDataset(_records(tmp), 1),
    "CsvDataset": lambda tmp: tf.data.experimental.CsvDataset(_text(tmp), [tf.string, tf.int32]),
    "interleave": lambda tmp: R(4).interleave(R, cycle_length=2, num_parallel_calls=2),
    "flat_map": lambda tmp: R(4).flat_map(R),
    "map": lambda tmp: R(4).map(lambda x: x + 1, num_parallel_calls=2),
    "filter": lambda tmp: R(4).filter(lambda x: x > 1),
    "shuffle": lambda tmp: R(4).shuffle(3),
    "batch": lambda tmp: R(4).batch(2, num_parallel_calls=2),
    "padded_batch": lambda tmp: R(4).padded_batch(2),
    "dense_to_sparse_batch": lambda tmp: R(4).map(lambda x: tf.fill([2], x)).sparse_batch(2, [4]),
    "group_by_window": lambda tmp: R(4).group_by_window(
        lambda x: x % 2, lambda key, window: window.batch(2), window_size=2
    ),
    "rebatch": lambda tmp: R(8).batch(4).rebatch(2),
    "map_and_batch": lambda tmp: R(4).apply(
        tf.data.experimental.map_and_batch(lambda x: x, 2)  # deprecated, still made by TFDS
    ),
    "window": lambda tmp: R(4).window(2),
    "scan": lambda tmp: R(4).scan(tf.constant(0, tf.int64), lambda s, x: (s + x, x)),
    "unbatch": lambda tmp: R(4).batch(2).unbatch(),
    "cache": lambda tmp: R(4).cache(),
    "prefetch": lambda tmp: R(4).prefetch(2),
    "repeat": lambda tmp: R(4).repeat(2),
    "take": lambda tmp: R(4).take(2),
    "skip": lambda tmp: R(4).skip(2),
    "shard": lambda tmp: R(4).shard(2, 1),
    "zip": lambda tmp: tf.data.Dataset.zip((R(4), R(4))),
    "concatenate": lambda tmp: R(4).concatenate(R(4)),
    "sample_from_datasets": lambda tmp: tf.data.Dataset.sample_from_datasets([R(4), R(4)]),
}


def _tf_data_classes() -> set[str]:
    names: set[str] = set()
    for package in ("tensorflow.python.data.ops", "tensorflow.python.data.experimental.ops"):
        for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
            module = importlib.import_module(f"{package}.{info.name}")
            names |= {name for name, value in vars(module).items() if inspect.isclass(value)}
    return names


def test_every_private_dataset_class_in_the_table_exists():
    known = _tf_data_classes()
    named = {cls for method in _tf.METHODS for cls in method.classes} | _tf.NOT_STAGES
    assert sorted(named - known) == []


def test_every_method_has_a_builder_here():
    assert set(BUILDERS) | {"from_generator"} == {method.name for method in _tf.METHODS}


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_each_call_makes_a_class_its_record_names(name, tmp_path):
    dataset = BUILDERS[name](tmp_path)
    assert type(dataset).__name__ in _tf.method_named(name).classes
    assert _tf.method_of(dataset) is _tf.method_named(name)


def test_from_generator_is_a_flat_map_closing_over_the_generator():
    spec = tf.TensorSpec((), tf.int32)
    dataset = tf.data.Dataset.from_generator(_generator, output_signature=spec)
    assert _tf.method_of(dataset).name == "flat_map"
    assert _tf.generator_function(dataset) is _generator  # the closure's `_generator`


def test_options_and_restructuring_are_added_by_tf_data():
    assert _tf.added_by_tf_data(R(4).with_options(tf.data.Options()))
    assert _tf.added_by_tf_data(R(4).apply(tf.data.experimental.assert_cardinality(4)))
    assert _tf.added_by_tf_data(_tf.inputs(R(4).batch(2).unbatch())[0])  # _RestructuredDataset
    assert not _tf.added_by_tf_data(R(4))


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (lambda: R(4).map(lambda x: x, num_parallel_calls=3), {"num_parallel_calls": 3}),
        (
            lambda: R(4).interleave(R, cycle_length=2, block_length=3, num_parallel_calls=-1),
            {"cycle_length": 2, "block_length": 3, "num_parallel_calls": -1},
        ),
        (lambda: R(4).batch(5, drop_remainder=True), {"batch_size": 5, "drop_remainder": True}),
        (lambda: R(4).shuffle(7), {"buffer_size": 7, "reshuffle_each_iteration": True}),
        (
            lambda: R(4).shuffle(7, reshuffle_each_iteration=False),
            {"reshuffle_each_iteration": False},
        ),
        (lambda: R(4).prefetch(-1), {"buffer_size": -1}),
        (lambda: R(4).repeat(2), {"count": 2}),
        (lambda: R(4).shard(3, 1), {"num_shards": 3, "index": 1}),
    ],
)
def test_the_arguments_are_kept_in_the_private_attributes_read(build, expected):
    found = _tf.parameters(build())
    assert {name: found[name] for name in expected} == expected


def test_a_reader_keeps_num_parallel_reads(tmp_path):
    path = _records(tmp_path)
    reader = tf.data.TFRecordDataset([path, path], num_parallel_reads=2)
    assert _tf.parameters(reader)["num_parallel_reads"] == 2


def test_every_parameter_attribute_is_found_on_some_dataset(tmp_path):
    path = _records(tmp_path)
    datasets = [
        R(4).interleave(R, cycle_length=2, block_length=1, num_parallel_calls=2),
        R(4).batch(2, drop_remainder=True).shuffle(2).repeat(2).shard(2, 0),
        tf.data.TFRecordDataset([path, path], num_parallel_reads=2),
        R(4).window(2),
    ]
    found = {
        a
        for d in datasets
        for o in _tf.walk_inputs(d)
        for a in _tf.PARAMETER_ATTRIBUTES
        if hasattr(o, a)
    }
    assert found == set(_tf.PARAMETER_ATTRIBUTES)


def test_the_function_attributes_hold_the_users_function():
    def parse(x):
        return x + 1

    def keep(x):
        return x > 0

    def key(x):
        return x % 2

    assert _tf.user_function(R(4).map(parse)) is parse
    assert _tf.user_function(R(4).filter(keep)) is keep
    grouped = R(4).group_by_window(key, lambda k, window: window.batch(2), window_size=2)
    reduce_window = grouped._reduce_func._func
    assert _tf.user_function(grouped) is reduce_window  # the reduce: tf.data wraps the key
    assert _tf.key_function(grouped) is key
    assert _tf.inner_datasets(grouped) == ["batch"]
    assert all(hasattr(grouped, attribute) for attribute in ("_key_func", "_reduce_func"))
    assert len(list(_tf.traced_graphs(grouped))) == 2
    assert _tf.user_function(R(4)) is None


def test_a_cache_keeps_its_file_name_where_it_is_read(tmp_path):
    assert _tf.cache_file(tf.data.Dataset.range(4).cache()) == ""
    assert _tf.cache_file(tf.data.Dataset.range(4).cache(str(tmp_path / "c"))).endswith("c")
    assert _tf.cache_file(tf.data.Dataset.range(4)) is None


def test_the_reader_inside_an_interleave_is_found(tmp_path):
    files = tf.data.Dataset.from_tensor_slices([_records(tmp_path)])
    dataset = files.interleave(lambda name: tf.data.TFRecordDataset(name))
    assert _tf.reader_in(dataset) == "TFRecordDataset"


@pytest.mark.parametrize(
    ("build", "count"),
    [
        (lambda: R(4).map(lambda x: x), 1),
        (lambda: R(4).interleave(R), 1),
        (lambda: tf.data.Dataset.zip((R(4), R(5), R(6))), 3),
        (lambda: R(4).concatenate(R(5)), 2),
        (lambda: R(4).batch(2).prefetch(1), 1),
    ],
)
def test_the_walk_finds_the_inputs(build, count):
    dataset = build()
    assert len(_tf.inputs(dataset)) == count
    walked = list(_tf.walk_inputs(dataset))
    assert walked[0] is dataset
    assert len(walked) == len({id(d) for d in walked}) >= count + 1


def test_tensorflow_folders_and_its_own_functions():
    assert _tf.tensorflow_dir() == Path(tf.__file__).parent
    assert (_tf.tensorflow_dir("data") / "ops").is_dir()
    assert (_tf.tensorflow_dir("autograph")).is_dir()
    unbatched = R(4).batch(2).unbatch()  # tf.data maps `normalize` over the input
    normalize = _tf.user_function(_tf.inputs(_tf.inputs(unbatched)[0])[0])
    assert normalize is not None and _tf.is_tf_data_function(normalize)
    assert not _tf.is_tf_data_function(_generator)


def test_the_traced_stack_lists_this_file():
    frames = _tf.traced_stack()
    assert all(isinstance(file, str) and isinstance(line, int) for file, line in frames)
    assert any(Path(file) == Path(__file__) for file, _ in frames)


def test_each_intercepted_call_is_patched_and_restored():
    targets = {method.name: _tf.patch_target(method) for method in _tf.intercepted()}
    before = {name: inspect.getattr_static(*target) for name, target in targets.items()}
    seen = []

    def wrap(method, original):
        seen.append(method.name)
        assert inspect.signature(original).parameters.keys() >= method.arguments.keys()
        return lambda *args, **kwargs: (method.name, original(*args, **kwargs))

    with _tf.intercept(wrap):
        assert R(4).map(lambda x: x)[0] == "map"
    assert sorted(seen) == sorted(targets)
    assert {name: inspect.getattr_static(*t) for name, t in targets.items()} == before


def test_intercept_resolves_through_the_mro_and_removes_what_it_added(monkeypatch):
    class Base:
        def map(self):
            return "base"

    class Child(Base):
        pass

    monkeypatch.setattr(_intercept, "intercepted", lambda: (_tf.method_named("map"),))
    monkeypatch.setattr(_intercept, "patch_target", lambda method: (Child, "map"))

    def use_it() -> None:
        with _tf.intercept(lambda method, original: lambda self: "wrapped"):
            assert "map" in vars(Child)
            assert Child().map() == "wrapped"
            raise RuntimeError("restored also when the block raises")

    with pytest.raises(RuntimeError):
        use_it()
    assert "map" not in vars(Child)
    assert Child().map() == "base"


def test_every_tunable_call_has_a_record_and_is_intercepted():
    # A script's `DataLoader(...)` is PyTorch's recorder's to intercept, not TensorFlow's.
    tf_calls = {method for method, _ in TUNABLE} - {"DataLoader"}
    assert tf_calls == {m.name for m in _tf.intercepted()}


def test_the_model_nodes_of_a_tuned_pipeline_map_to_stage_kinds():
    files = R(4).map(lambda x: tf.strings.as_string(x))
    dataset = (
        files.interleave(lambda s: tf.data.Dataset.from_tensors(s), num_parallel_calls=-1)
        .map(lambda s: s, num_parallel_calls=-1)
        .filter(lambda s: True)
        .shuffle(4)
        .batch(2, num_parallel_calls=-1)
        .prefetch(-1)
        .repeat()
    )
    expected = {StageKind.MAP, StageKind.INTERLEAVE, StageKind.FILTER, StageKind.SHUFFLE}
    expected |= {StageKind.BATCH, StageKind.PREFETCH}
    iterator = iter(dataset)
    # The model links a stage's node into the main path once elements have flowed through it,
    # which takes the background threads a varying number of pulls: pull until it is whole.
    for _ in range(100):
        for _ in range(20):
            next(iterator)
        nodes = _tf.autotune_nodes(iterator)
        kinds = {kind for node in nodes for kind in _tf.node_kinds(node.name)}
        if kinds >= expected:
            break
    assert kinds >= expected
    tuned = {(n.name, p.name) for n in nodes for p in n.parameters if p.tunable}
    parameters = {p for _, p in tuned}
    assert parameters <= {"parallelism", "buffer_size", "cycle_length"}


class _Base:
    def fit(self) -> str:
        return "base"


class _Own(_Base):
    def fit(self) -> str:
        return "own"


def test_patched_removes_an_inherited_attribute_again():
    class Child(_Base):
        pass

    def fails_inside() -> None:
        with patched(Child, "fit", lambda self: "patched"):
            assert Child().fit() == "patched"
            raise RuntimeError("the block fails")

    with pytest.raises(RuntimeError, match="the block fails"):
        fails_inside()
    assert "fit" not in vars(Child) and Child().fit() == "base"


def test_patched_restores_an_own_attribute():
    with patched(_Own, "fit", lambda self: "patched"):
        assert _Own().fit() == "patched"
    assert _Own().fit() == "own"


def test_patched_keras_fit_is_inherited_or_own_and_restored():
    import keras

    before = inspect.getattr_static(keras.Model, "fit")
    own = "fit" in vars(keras.Model)
    with patched(keras.Model, "fit", lambda self: "patched"):
        assert keras.Model.fit(None) == "patched"
    assert inspect.getattr_static(keras.Model, "fit") is before
    assert ("fit" in vars(keras.Model)) is own


def test_a_v1_adapter_wraps_the_real_dataset_in_dataset():
    adapted = tf.compat.v1.data.Dataset.range(4).map(lambda x: x + 1)
    assert type(adapted).__name__ == _tf.V1_ADAPTER
    real = _tf.unwrap_v1(adapted)
    assert type(real).__name__ == "_MapDataset"
    assert [type(d).__name__ for d in _tf.inputs(real)] == ["_RangeDataset"]
    assert _tf.unwrap_v1(real) is real


def test_scan_keeps_its_function_and_flat_map_the_calls_inside_it():
    def running(state, x):
        return state + x, x

    assert _tf.user_function(R(4).scan(tf.constant(0, tf.int64), running)) is running
    assert _tf.inner_datasets(R(4).window(2).flat_map(lambda w: w.padded_batch(2))) == [
        "padded_batch"
    ]


def test_cardinality_and_the_options_a_dataset_carries():
    options = tf.data.Options()
    options.experimental_deterministic = False  # the deprecated spelling real loaders use
    dataset = R(10).batch(4).with_options(options)
    assert _tf.cardinality(dataset) == 3
    assert _tf.cardinality(R(10).repeat()) is None
    assert _tf.cardinality(R(10).filter(lambda x: x > 2)) is None
    carried = _tf.dataset_options(dataset)
    assert carried is not None and carried.deterministic is False
    assert _tf.dataset_options(R(3)).deterministic is None
    assert _tf.dataset_options([1, 2]) is None


def test_the_serialised_graph_names_a_resource_only_this_process_holds():
    """`_as_serialized_graph` (what `distribute()` ships) writes a variable and a table as the
    ops that rebuild them, and an iterator as a constant handle into this process."""
    variable = tf.Variable(3, dtype=tf.int64)
    keys = tf.constant([1, 2], tf.int64)
    table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(keys, keys * 10), -1)
    assert _tf.process_resources(R(4).map(lambda x: table.lookup(x) * variable)) == []
    iterator = iter(R(10))
    assert _tf.process_resources(R(4).map(lambda x: x + next(iterator))) == ["IteratorResource"]
