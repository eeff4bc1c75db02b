"""Picking the user's own frames out of tracebacks, and rendering them one per line."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
import traceback
from pathlib import Path

import pytest

from tests.clean_process import in_clean_process
from tfperf.tracebacks import (
    describe_exception,
    drop_library_frames,
    exception_user_frames,
    format_frames,
    format_syntax_error,
    is_user_file,
    missing_module_hint,
    user_frames,
)


def _frame(filename, lineno=1, name="f", line="x = 1"):
    return traceback.FrameSummary(str(filename), lineno, name, line=line)


def _import_file(path: Path, source: str):
    """Imports `source` written at `path`, so its functions raise with real frames there."""
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(f"tb_test_{path.stem}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_user_frames_keeps_frames_in_user_directory_in_order(tmp_path):
    frames = [
        _frame(tmp_path / "pipeline.py", 3, "<module>"),
        _frame("/somewhere/else/lib.py", 9, "helper"),
        _frame(tmp_path / "sub" / "parse.py", 7, "parse"),
    ]
    kept = user_frames(frames, [tmp_path])
    assert [(Path(f.filename).name, f.lineno) for f in kept] == [
        ("pipeline.py", 3),
        ("parse.py", 7),
    ]


def test_user_frames_matches_a_single_user_file(tmp_path):
    pipeline, other = tmp_path / "pipeline.py", tmp_path / "other.py"
    pipeline.touch()
    kept = user_frames([_frame(pipeline), _frame(other)], [pipeline])
    assert [f.filename for f in kept] == [str(pipeline)]


def test_user_frames_accepts_tuples_and_attribute_objects(tmp_path):
    class StackFrame:  # shaped like TensorFlow's op.traceback frames
        filename, lineno, name, line = str(tmp_path / "b.py"), 5, "g", ""

    kept = user_frames([(str(tmp_path / "a.py"), 2, "f", "y = 2"), StackFrame()], [tmp_path])
    assert [(f.name, f.lineno, f.line) for f in kept] == [("f", 2, "y = 2"), ("g", 5, "")]


def test_user_frames_resolves_symlinks(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    (real / "pipeline.py").touch()
    assert len(user_frames([_frame(link / "pipeline.py")], [real])) == 1
    assert len(user_frames([_frame(real / "pipeline.py")], [link])) == 1


def test_user_frames_skips_pseudo_files_and_installed_packages(tmp_path):
    installed = tmp_path / ".venv" / "lib" / "python3.11" / "site-packages" / "tensorflow" / "x.py"
    frames = [_frame("<string>"), _frame("<frozen importlib._bootstrap>"), _frame(installed)]
    assert user_frames(frames, [tmp_path]) == []


def test_is_user_file_excludes_the_standard_library_and_tfperf(tmp_path):
    import tfperf.tracebacks

    assert is_user_file(str(tmp_path / "pipeline.py"), [tmp_path])
    assert not is_user_file(traceback.__file__, [Path(traceback.__file__).parent.parent])
    assert not is_user_file(tfperf.tracebacks.__file__, [Path(tfperf.tracebacks.__file__).parent])


def test_format_frames_renders_one_line_per_frame():
    frames = [
        _frame("/p/pipeline.py", 23, "parse", "image = tf.io.decode_jpeg(x)"),
        _frame("/p/helper.py", 4, "load", "   return open(path)   "),
    ]
    assert format_frames(frames) == (
        "  pipeline.py:23 in parse: image = tf.io.decode_jpeg(x)\n"
        "  helper.py:4 in load: return open(path)"
    )


def test_format_frames_keeps_the_frames_nearest_the_error():
    frames = [_frame("/p/pipeline.py", n, f"f{n}", f"line{n}") for n in range(1, 6)]
    assert format_frames(frames, limit=2) == (
        "  ... (3 earlier frames)\n  pipeline.py:4 in f4: line4\n  pipeline.py:5 in f5: line5"
    )
    assert format_frames(frames[:2], limit=1).startswith("  ... (1 earlier frame)\n")


def test_format_frames_without_source_line_or_frames(tmp_path):
    missing = tmp_path / "gone.py"  # no file, so no line to show
    assert format_frames([traceback.FrameSummary(str(missing), 3, "f")]) == "  gone.py:3 in f"
    assert format_frames([]) == ""


def test_exception_user_frames_walks_the_traceback(tmp_path):
    module = _import_file(
        tmp_path / "userlib.py",
        """
        def parse(x):
            return int(x)

        def load():
            return parse("not a number")
        """,
    )
    with pytest.raises(ValueError, match="invalid literal") as caught:
        module.load()
    frames = exception_user_frames(caught.value, [tmp_path])
    assert [(f.name, f.lineno, f.line) for f in frames] == [
        ("load", 6, 'return parse("not a number")'),
        ("parse", 3, "return int(x)"),
    ]
    assert format_frames(frames) == (
        '  userlib.py:6 in load: return parse("not a number")\n'
        "  userlib.py:3 in parse: return int(x)"
    )


def test_exception_user_frames_falls_back_to_the_cause(tmp_path):
    module = _import_file(tmp_path / "causelib.py", "def boom():\n    raise KeyError('k')\n")
    try:
        try:
            module.boom()
        except KeyError as error:
            raise RuntimeError("wrapped by a library") from error
    except RuntimeError as wrapped:
        frames = exception_user_frames(wrapped, [tmp_path])
    assert [(f.name, f.lineno) for f in frames] == [("boom", 2)]


def test_exception_user_frames_without_user_code_is_empty(tmp_path):
    with pytest.raises(ZeroDivisionError) as caught:
        _ = 1 / 0
    assert exception_user_frames(caught.value, [tmp_path]) == []
    assert exception_user_frames(ValueError("never raised"), [tmp_path]) == []


def test_describe_exception_names_type_message_and_frames(tmp_path):
    module = _import_file(tmp_path / "desclib.py", "def f():\n    raise OSError('disk full')\n")
    with pytest.raises(OSError, match="disk full") as caught:
        module.f()
    assert describe_exception(caught.value, [tmp_path]) == (
        "OSError: disk full\n  desclib.py:2 in f: raise OSError('disk full')"
    )
    assert describe_exception(StopIteration(), [tmp_path]) == "StopIteration"


def test_format_syntax_error_shows_line_and_caret():
    with pytest.raises(SyntaxError) as caught:
        compile("def f():\n        x = [1 2]\n", "/p/pipeline.py", "exec")
    text = format_syntax_error(caught.value)
    lines = text.splitlines()
    assert lines[0].startswith("pipeline.py, line 2: SyntaxError: invalid syntax")
    assert lines[1] == "    x = [1 2]"
    # The caret sits under "1 2", measured on the stripped line.
    assert lines[2].strip().startswith("^")
    assert lines[2].index("^") == lines[1].index("1")
    assert describe_exception(caught.value, []) == text


def test_format_syntax_error_names_indentation_errors():
    with pytest.raises(IndentationError) as caught:
        compile("def f():\nreturn 1\n", "/p/pipeline.py", "exec")
    assert format_syntax_error(caught.value).startswith("pipeline.py, line 2: IndentationError:")


def test_format_syntax_error_without_source_text():
    error = SyntaxError("bad thing", ("/p/gen.py", 7, None, None))
    assert format_syntax_error(error) == "gen.py, line 7: SyntaxError: bad thing"


def test_user_frames_takes_relative_filenames_from_the_working_directory(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    monkeypatch.chdir(tmp_path)
    assert len(user_frames([_frame("pipeline.py")], [tmp_path])) == 1
    monkeypatch.chdir(tmp_path / "a")
    assert len(user_frames([_frame("pipeline.py")], [tmp_path / "a"])) == 1
    assert user_frames([_frame("pipeline.py")], [tmp_path / "b"]) == []


def test_missing_module_hint_names_pip_package_and_sibling_path(tmp_path):
    hint = missing_module_hint(ModuleNotFoundError("No module named 'PIL'", name="PIL"), tmp_path)
    assert f"`{sys.executable} -m pip install pillow`" in hint
    assert f"put PIL.py or a PIL/ package in {tmp_path}" in hint
    dotted = ModuleNotFoundError(name="mylib.readers")
    assert "pip install mylib`" in missing_module_hint(dotted, tmp_path)


def test_missing_module_hint_is_empty_for_other_errors(tmp_path):
    assert missing_module_hint(ImportError("cannot import name 'x'"), tmp_path) == ""
    assert missing_module_hint(ModuleNotFoundError("no name"), tmp_path) == ""


_NUMERICS_STEP = """
import tensorflow as tf

BASELINE = {"batch_size": 4}

def make_dataset(knobs):
    return tf.data.Dataset.range(12).map(lambda x: tf.cast(x, tf.float32)).batch(4)

def make_train_step(knobs):
    @tf.function
    def step(batch):
        loss = tf.math.log(batch - 100.0)
        return tf.debugging.check_numerics(loss, "loss is NaN")
    return step
"""

_NUMPY_FUNCTION_RAISES = """
import tensorflow as tf

BASELINE = {"batch_size": 4}

def _parse(x):
    raise ValueError("bad record")

def make_dataset(knobs):
    ds = tf.data.Dataset.range(12).batch(4)
    return ds.map(lambda x: tf.numpy_function(_parse, [x], tf.int64))

def make_train_step(knobs):
    return lambda batch: batch
"""


def test_drop_library_frames_keeps_the_user_s_frames_and_the_error(tmp_path):
    library = Path(sys.modules["pytest"].__file__).parent / "python.py"  # site-packages
    text = (
        "Graph execution error:\n\n"
        "Detected at node CheckNumerics defined at (most recent call last):\n"
        '  File "<frozen runpy>", line 198, in _run_module_as_main\n'
        f'  File "{library}", line 3, in call\n'
        "    ret = func(*args)\n"
        "          ^^^^^^^^^^^\n\n"
        f'  File "{tmp_path / "train.py"}", line 12, in step\n'
        "loss is NaN : Tensor had NaN values"
    )
    assert drop_library_frames(text).splitlines() == [
        "Graph execution error:",
        "Detected at node CheckNumerics defined at (most recent call last):",
        f'  File "{tmp_path / "train.py"}", line 12, in step',
        "loss is NaN : Tensor had NaN values",
    ]


@pytest.mark.tf
@pytest.mark.parametrize(
    ("source", "expected", "user_line"),
    [
        (_NUMERICS_STEP, "loss is NaN : Tensor had NaN values", ", line 12, in step"),
        (_NUMPY_FUNCTION_RAISES, "ValueError: bad record", ", line 6, in _parse"),
    ],
    ids=["check-numerics-in-a-tf-function", "numpy-function-raises"],
)
def test_tensorflow_errors_keep_their_text_and_the_user_s_line_only(
    write_pipeline, source, expected, user_line
):
    from tfperf.errors import PipelineRuntimeError
    from tfperf.frameworks.tensorflow import profile_pipeline
    from tfperf.pipeline import load_pipeline

    pipeline = load_pipeline(write_pipeline(source))
    with pytest.raises(PipelineRuntimeError) as raised:
        profile_pipeline(pipeline, pipeline.baseline, steps=2, warmup=0)
    message = str(raised.value)
    assert expected in message
    assert f'pipeline.py"{user_line}' in message
    for internal in ("script_ops.py", "autograph", "tfperf/", "<frozen"):
        assert internal not in message


class _NoLabels:
    """A map-style dataset whose item 3 has no label: raises in the worker that loads it."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> int:
        if index == 3:
            raise KeyError(f"no label for item {index}")
        return index


def _worker_error() -> BaseException:
    """What a real DataLoader re-raises in the trainer when one of its workers raised."""
    torch_data = pytest.importorskip("torch.utils.data")
    loader = torch_data.DataLoader(_NoLabels(), batch_size=2, num_workers=1)
    with pytest.raises(KeyError) as raised:
        list(loader)
    return raised.value


@in_clean_process
def test_a_dataloader_workers_exception_shows_the_users_getitem_line():
    """Issue 54 item 3: torch re-raises a worker's exception with the worker's traceback as
    text (`ExceptionWrapper`); the frames of the trainer's own traceback are torch's."""
    error = _worker_error()
    frames = exception_user_frames(error, [Path(__file__).parent])
    assert [frame.name for frame in frames] == ["__getitem__"], frames
    assert frames[0].line == 'raise KeyError(f"no label for item {index}")'
    assert frames[0].lineno == _NoLabels.__getitem__.__code__.co_firstlineno + 2


@in_clean_process
def test_a_dataloader_workers_exception_reads_as_the_user_raised_it():
    from tfperf.tracebacks import exception_headline

    headline = exception_headline(_worker_error())
    assert headline == "KeyError: 'no label for item 3' (raised in DataLoader worker process 0)"
    described = describe_exception(_worker_error(), [Path(__file__).parent])
    assert described.startswith(headline + "\n  test_tracebacks.py:")
    assert "worker.py" not in described and "fetch.py" not in described


def test_user_place_on_a_librarys_thread_is_the_line_waiting_on_it(tmp_path):
    # A MirroredStrategy runs each replica's step on a thread of its own: that thread's stack
    # holds none of the user's lines, so the place is the user's line on the main thread.
    from tfperf.tracebacks import user_place

    module = _import_file(
        tmp_path / "train.py",
        """
        import threading

        def run(work):
            thread = threading.Thread(target=work)
            thread.start(); thread.join()  # one line: the main thread waits on it throughout
        """,
    )
    places: list[str] = []
    module.run(lambda: places.append(user_place(sys._getframe(), [tmp_path])))
    assert places == ["train.py:6"]
    assert user_place(sys._getframe(), [tmp_path / "other.py"]) == "an unknown line"
