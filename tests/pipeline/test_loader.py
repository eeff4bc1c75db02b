"""Loading pipeline files: the contract, the messages, and leaving the interpreter as it was."""

from __future__ import annotations

import os
import pickle
import sys
import textwrap
from pathlib import Path

import pytest

from tfperf.errors import PipelineFileError
from tfperf.knobs import AUTOTUNE, Choices, Fixed, IntRange, Knobs
from tfperf.pipeline import PipelineFile, PipelineKind, load_pipeline

CONTRACT = """
def make_dataset(knobs):
    return ["dataset", knobs.batch_size]

def make_model(knobs):
    return "model"
"""


def write(directory: Path, source: str, name: str = "pipeline.py") -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))
    return path


def load_error(path: Path | str, argv=()) -> str:
    with pytest.raises(PipelineFileError) as caught:
        load_pipeline(path, argv)
    return str(caught.value)


@pytest.fixture(autouse=True)
def interpreter_state_is_restored():
    """Every test, passing or failing to load, must leave argv, path, cwd and modules as found."""
    argv, path, entries, cwd = sys.argv, sys.path, list(sys.path), os.getcwd()
    modules = set(sys.modules)
    yield
    assert sys.argv is argv
    assert sys.path is path
    assert sys.path == entries
    assert os.getcwd() == cwd
    for name in set(sys.modules) - modules:  # keep tests independent of each other's helpers
        if name.startswith("tfperf_pipeline_") or name.startswith("helper"):
            del sys.modules[name]


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """Runs the test from tmp_path, so messages show the short name `pipeline.py`."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


# --- loading a good file -------------------------------------------------------------------


def test_loads_the_contract(tmp_path):
    pipeline = load_pipeline(write(tmp_path, CONTRACT))
    assert isinstance(pipeline, PipelineFile)
    assert pipeline.path == (tmp_path / "pipeline.py").resolve()
    assert pipeline.name == "pipeline"
    assert pipeline.make_dataset(Knobs(batch_size=8)) == ["dataset", 8]
    assert pipeline.make_model is not None
    assert pipeline.make_train_step is None
    assert pipeline.user_paths == (tmp_path.resolve(),)
    assert pipeline.module.__name__.startswith("tfperf_pipeline_pipeline_")
    assert sys.modules[pipeline.module.__name__] is pipeline.module


def test_absent_baseline_gives_defaults(tmp_path):
    pipeline = load_pipeline(write(tmp_path, CONTRACT))
    assert pipeline.baseline == Knobs()
    assert pipeline.has_baseline is False
    assert pipeline.search_space == {}


def test_baseline_overrides_defaults(tmp_path):
    source = CONTRACT + 'BASELINE = {"batch_size": 64, "num_parallel_calls": 1, "prefetch": 0}\n'
    pipeline = load_pipeline(write(tmp_path, source))
    assert pipeline.has_baseline is True
    assert pipeline.baseline == Knobs(batch_size=64, num_parallel_calls=1, prefetch=0)
    assert pipeline.baseline.shuffle_buffer == Knobs().shuffle_buffer


def test_baseline_may_be_knobs(tmp_path):
    source = CONTRACT + "from tfperf.knobs import Knobs\nBASELINE = Knobs(batch_size=16)\n"
    assert load_pipeline(write(tmp_path, source)).baseline == Knobs(batch_size=16)


@pytest.mark.parametrize("value", ['"AUTOTUNE"', "-1", '"autotune"'])
def test_autotune_as_string_or_minus_one(tmp_path, value):
    source = CONTRACT + (
        f'BASELINE = {{"num_parallel_calls": {value}, "prefetch": {value}}}\n'
        f'SEARCH_SPACE = {{"cycle_length": [{value}, 2], "prefetch": {value}}}\n'
    )
    pipeline = load_pipeline(write(tmp_path, source))
    assert pipeline.baseline.num_parallel_calls == AUTOTUNE
    assert pipeline.baseline.prefetch == AUTOTUNE
    assert pipeline.search_space["cycle_length"] == Choices((AUTOTUNE, 2))
    assert pipeline.search_space["prefetch"] == Fixed(AUTOTUNE)


def test_search_space_is_parsed(tmp_path):
    source = CONTRACT + (
        'SEARCH_SPACE = {"batch_size": [32, 64, 128], "prefetch": {"low": 1, "high": 8}, '
        '"cycle_length": 4}\n'
    )
    assert load_pipeline(write(tmp_path, source)).search_space == {
        "batch_size": Choices((32, 64, 128)),
        "prefetch": IntRange(1, 8),
        "cycle_length": Fixed(4),
    }


def test_keeps_both_train_step_and_model(tmp_path):
    source = CONTRACT + "def make_train_step(knobs):\n    return make_model(knobs)\n"
    pipeline = load_pipeline(write(tmp_path, source))
    assert pipeline.make_train_step is not None
    assert pipeline.make_model is not None


def test_train_step_alone_and_model_none_is_absent(tmp_path):
    source = """
    def make_dataset(knobs):
        return []
    make_model = None
    def make_train_step(knobs):
        return print
    """
    pipeline = load_pipeline(write(tmp_path, source))
    assert pipeline.make_model is None
    assert pipeline.make_train_step is not None


@pytest.mark.parametrize(
    "definition",
    [
        "def make_dataset(knobs, split='train'):\n    return split",
        "def make_dataset(*args):\n    return args",
        "def make_dataset(knobs, /, *, cache=False, **options):\n    return cache",
        "make_dataset = lambda knobs: knobs",
        "class _Maker:\n    def __call__(self, knobs):\n        return knobs\n"
        "make_dataset = _Maker()",
        "import functools\nmake_dataset = functools.partial(lambda prefix, knobs: knobs, 'p')",
    ],
)
def test_signatures_callable_with_one_argument_are_accepted(tmp_path, definition):
    source = definition + "\ndef make_model(knobs):\n    return None\n"
    pipeline = load_pipeline(write(tmp_path, source))
    assert callable(pipeline.make_dataset)


def test_main_block_does_not_run(tmp_path):
    marker = tmp_path / "main-ran"
    source = CONTRACT + (
        'if __name__ == "__main__":\n'
        f"    open({str(marker)!r}, 'w').close()\n"
        "    raise SystemExit(3)\n"
    )
    pipeline = load_pipeline(write(tmp_path, source))
    assert not marker.exists()
    assert pipeline.module.__name__ != "__main__"


def test_file_sees_its_path_argv_and_directory_while_loading(tmp_path):
    source = CONTRACT + "import sys\nseen_argv = list(sys.argv)\nseen_path0 = sys.path[0]\n"
    path = write(tmp_path, source)
    pipeline = load_pipeline(path, ["--data", "/d"])
    assert pipeline.module.seen_argv == [str(path.resolve()), "--data", "/d"]
    assert pipeline.module.seen_path0 == str(tmp_path.resolve())


def test_dataclasses_and_pickling_in_user_code_work(tmp_path):
    source = CONTRACT + ("import dataclasses\n@dataclasses.dataclass\nclass Record:\n    x: int\n")
    pipeline = load_pipeline(write(tmp_path, source))
    record = pipeline.module.Record(3)
    assert pickle.loads(pickle.dumps(record)) == record


def test_restores_state_after_top_level_chdir_and_path_changes(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    source = CONTRACT + (
        "import os, sys\n"
        f"os.chdir({str(elsewhere)!r})\n"
        "sys.path.append('/nonexistent/added-by-pipeline')\n"
        "sys.argv.append('--junk')\n"
    )
    argv, path, cwd = list(sys.argv), list(sys.path), os.getcwd()
    load_pipeline(write(tmp_path, source))
    assert (sys.argv, sys.path, os.getcwd()) == (argv, path, cwd)


def test_restores_state_after_rebinding_sys_path(tmp_path):
    source = CONTRACT + "import sys\nsys.path = ['/only/this']\nsys.argv = []\n"
    path = list(sys.path)
    load_pipeline(write(tmp_path, source))
    assert sys.path == path


# --- sibling modules -----------------------------------------------------------------------


def test_top_level_sibling_import(tmp_path):
    write(tmp_path, "VALUE = 7\n", name="helper_top.py")
    source = "import helper_top\n" + CONTRACT + "SEEN = helper_top.VALUE\n"
    assert load_pipeline(write(tmp_path, source)).module.SEEN == 7


def test_lazy_sibling_import_through_call(tmp_path):
    write(tmp_path, "VALUE = 11\n", name="helper_lazy.py")
    source = """
    import sys

    def make_dataset(knobs):
        import helper_lazy
        return helper_lazy.VALUE, list(sys.argv[1:])

    def make_model(knobs):
        return None
    """
    pipeline = load_pipeline(write(tmp_path, source), ["--fast"])
    argv, path = sys.argv, list(sys.path)
    assert pipeline.call(pipeline.make_dataset, pipeline.baseline) == (11, ["--fast"])
    assert sys.argv is argv
    assert sys.path == path


def test_call_restores_state_when_the_function_raises(tmp_path):
    source = CONTRACT + (
        "import os\ndef broken(knobs):\n    os.chdir('/')\n    raise RuntimeError('bad knobs')\n"
    )
    pipeline = load_pipeline(write(tmp_path, source))
    with pytest.raises(RuntimeError, match="bad knobs"):
        pipeline.call(pipeline.module.broken, pipeline.baseline)


def test_same_stem_in_two_directories_does_not_clash(tmp_path):
    body = """
    import helper

    def make_dataset(knobs):
        import helper as lazy
        return helper.WHERE, lazy.WHERE

    def make_model(knobs):
        return None
    """
    for where in ("a", "b"):
        write(tmp_path / where, f"WHERE = {where!r}\n", name="helper.py")
        write(tmp_path / where, body)
    first = load_pipeline(tmp_path / "a" / "pipeline.py")
    second = load_pipeline(tmp_path / "b" / "pipeline.py")
    assert first.module is not second.module
    assert first.module.__name__ != second.module.__name__
    assert first.name == second.name == "pipeline"
    assert second.call(second.make_dataset, second.baseline) == ("b", "b")
    assert first.call(first.make_dataset, first.baseline) == ("a", "a")
    assert sys.modules[first.module.__name__] is first.module
    assert sys.modules[second.module.__name__] is second.module


def test_loading_the_same_file_twice_gives_a_fresh_module(tmp_path):
    path = write(tmp_path, CONTRACT)
    first, second = load_pipeline(path), load_pipeline(path)
    assert first.module is not second.module
    assert sys.modules[second.module.__name__] is second.module


# --- the file itself -------------------------------------------------------------------------


def test_missing_file(tmp_path):
    missing = tmp_path / "nope.py"
    message = load_error(missing)
    assert message.startswith(f"No such pipeline file: {missing}. Check the path")
    assert "make_dataset(knobs)" in message


def test_missing_file_suggests_a_close_name(in_tmp):
    write(in_tmp, CONTRACT)
    message = load_error("pipline.py")
    assert message.startswith(
        f"No such pipeline file: pipline.py. Check the path (relative paths start from {in_tmp})."
        " Did you mean pipeline.py? A pipeline file is a .py file"
    )


def test_directory(tmp_path):
    write(tmp_path, CONTRACT)
    message = load_error(tmp_path)
    assert f"{tmp_path} is a directory, not a pipeline file" in message
    assert "Python files there: pipeline.py." in message


def test_directory_without_python_files(tmp_path):
    assert load_error(tmp_path).endswith("It holds no .py file.")


def test_unreadable_file(in_tmp, monkeypatch):
    write(in_tmp, CONTRACT)

    def deny(self):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "read_bytes", deny)
    assert load_error("pipeline.py") == (
        "Cannot read pipeline.py: Permission denied. Check that the file is readable by the "
        "user running tfperf."
    )


def test_not_a_python_file(tmp_path):
    path = tmp_path / "pipeline.txt"
    path.write_text(CONTRACT)
    message = load_error(path)
    assert f"{path} is not a Python file (expected a .py file, got '.txt')" in message
    assert "point it at the .py file" in message
    write(tmp_path, CONTRACT)
    assert f"Did you mean {tmp_path / 'pipeline.py'}?" in load_error(path)


def test_notebook_suggests_export(tmp_path):
    path = tmp_path / "pipeline.ipynb"
    path.write_text("{}")
    assert "jupyter nbconvert --to script" in load_error(path)


def test_not_utf8(in_tmp):
    (in_tmp / "pipeline.py").write_bytes(b"x = 1\n# caf\xe9\n")
    message = load_error("pipeline.py")
    assert message.startswith("pipeline.py is not UTF-8 text: line 2 holds byte 0xe9")
    assert "Save the file as UTF-8" in message


def test_unknown_encoding_declaration(in_tmp):
    (in_tmp / "pipeline.py").write_bytes(b"# -*- coding: klingon -*-\nx = 1\n")
    message = load_error("pipeline.py")
    assert message.startswith("pipeline.py declares an encoding Python cannot use")
    assert "coding" in message


def test_binary_file(in_tmp):
    (in_tmp / "pipeline.py").write_bytes(b"x = 1\x00\x00\n")
    assert load_error("pipeline.py").startswith("pipeline.py is not Python source: it contains NUL")


def test_syntax_error_shows_line_and_caret(in_tmp):
    write(in_tmp, "import os\n\nSIZES = [1 2]\n" + CONTRACT)
    message = load_error("pipeline.py")
    lines = message.splitlines()
    assert lines[0] == "pipeline.py has a syntax error, so tfperf cannot import it:"
    assert lines[1].startswith("  pipeline.py, line 3: SyntaxError: invalid syntax")
    assert lines[2] == "      SIZES = [1 2]"
    assert lines[3].strip().startswith("^")
    assert "python -m py_compile pipeline.py" in lines[4]


def test_indentation_error(in_tmp):
    write(in_tmp, "def make_dataset(knobs):\nreturn 1\n")
    assert "pipeline.py, line 2: IndentationError" in load_error("pipeline.py")


# --- importing it ----------------------------------------------------------------------------


def test_exception_while_importing_shows_user_frames(in_tmp):
    source = """
    def setup():
        raise ValueError("no files match /data/*.tfrecord")

    setup()
    """
    write(in_tmp, source)
    with pytest.raises(PipelineFileError) as caught:
        load_pipeline("pipeline.py")
    assert str(caught.value).splitlines() == [
        "pipeline.py raised ValueError while tfperf imported it: no files match /data/*.tfrecord",
        "  pipeline.py:5 in <module>: setup()",
        '  pipeline.py:3 in setup: raise ValueError("no files match /data/*.tfrecord")',
        "Top-level code runs when tfperf imports the file: fix the error above, or move work "
        "that needs data or a device into `make_dataset` or `make_model`.",
    ]
    assert isinstance(caught.value.__cause__, ValueError)


def test_missing_module_suggests_pip_or_sibling(in_tmp):
    write(in_tmp, "import not_a_real_module_xyz\n" + CONTRACT)
    message = load_error("pipeline.py")
    assert (
        "pipeline.py raised ModuleNotFoundError while tfperf imported it: "
        "No module named 'not_a_real_module_xyz'"
    ) in message
    assert "pipeline.py:1 in <module>: import not_a_real_module_xyz" in message
    assert f"{sys.executable} -m pip install not_a_real_module_xyz" in message
    assert (
        f"put not_a_real_module_xyz.py or a not_a_real_module_xyz/ package in {in_tmp}; "
        "tfperf puts that directory first on sys.path" in message
    )


def test_missing_module_knows_common_pip_names(tmp_path):
    message = load_error(write(tmp_path, "import cv2.dnn\n" + CONTRACT))
    assert "No module named 'cv2'" in message
    assert "-m pip install opencv-python`" in message


def test_sibling_with_syntax_error(in_tmp):
    write(in_tmp, "VALUE = (\n", name="helper_broken.py")
    write(in_tmp, "import helper_broken\n" + CONTRACT)
    message = load_error("pipeline.py")
    assert message.startswith("pipeline.py imports a module with a syntax error:")
    assert "helper_broken.py, line 1: SyntaxError" in message


def test_exit_while_importing_explains_main_guard_and_argv(in_tmp, capsys):
    write(in_tmp, "import argparse\nargparse.ArgumentParser().parse_args()\n" + CONTRACT)
    message = load_error("pipeline.py", ["--bogus"])
    assert message.startswith("pipeline.py called sys.exit(2) while tfperf imported it.")
    assert 'if __name__ == "__main__":' in message
    assert f"sys.argv = [{str(in_tmp / 'pipeline.py')!r}, '--bogus']" in message
    assert "parse_known_args()" in message
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_failed_import_leaves_no_module_behind(tmp_path):
    before = {name for name in sys.modules if name.startswith("tfperf_pipeline_")}
    load_error(write(tmp_path, "raise RuntimeError('boom')\n"))
    load_error(write(tmp_path, "def make_model(knobs):\n    return 1\n"))
    assert {name for name in sys.modules if name.startswith("tfperf_pipeline_")} == before


@pytest.mark.parametrize(
    "source",
    [
        "x = (\n",
        "import os, sys\nos.chdir('/')\nsys.path.append('/tmp/x')\nraise RuntimeError('late')\n",
        "import sys\nsys.path.insert(0, '/tmp/y')\nsys.exit(1)\n",
        "import not_a_real_module_xyz\n",
        "import os\nos.chdir('/')\ndef make_model(knobs):\n    return 1\n",
        CONTRACT + "BASELINE = {'batch': 1}\n",
        CONTRACT + "SEARCH_SPACE = {'prefetch': {'low': 3, 'high': 1}}\n",
    ],
    ids=["syntax", "raises", "exits", "no-module", "contract", "baseline", "search-space"],
)
def test_state_restored_after_each_failure_kind(tmp_path, source):
    argv, path, cwd = list(sys.argv), list(sys.path), os.getcwd()
    load_error(write(tmp_path, source))
    assert (sys.argv, sys.path, os.getcwd()) == (argv, path, cwd)


# --- the contract ----------------------------------------------------------------------------


def test_no_make_dataset_lists_functions_found(in_tmp):
    source = """
    import os
    from pathlib import Path

    def load(path):
        return path

    def parse(record):
        return record

    make_model = None
    """
    write(in_tmp, source)
    assert load_error("pipeline.py") == (
        "pipeline.py defines no `make_dataset`; tfperf calls `make_dataset(knobs)` to build the "
        "pipeline. Functions found: load, parse."
    )


def test_no_make_dataset_and_no_functions(in_tmp):
    write(in_tmp, "X = 1\n")
    assert load_error("pipeline.py").endswith("Functions found: none.")


def test_no_make_dataset_suggests_a_close_name(in_tmp):
    write(in_tmp, "def make_datasets(knobs):\n    return []\n")
    assert load_error("pipeline.py").endswith(
        "Functions found: make_datasets. Did you mean `make_datasets`? Rename it to `make_dataset`."
    )


def test_make_dataset_not_callable(in_tmp):
    write(in_tmp, "make_dataset = [1, 2, 3]\n")
    message = load_error("pipeline.py")
    assert message.startswith("pipeline.py: `make_dataset` is a list, not a function")
    assert "`def make_dataset(knobs):`" in message


SIGNATURES = [
    ("", "()", "Define it as `def {name}(knobs):` and read settings such as"),
    ("knobs, split", "(knobs, split)", "give `split` a default (e.g. `split=...`)"),
    ("*, knobs", "(*, knobs)", "Define it as `def {name}(knobs):`"),
    ("knobs, *, seed", "(knobs, *, seed)", "give `seed` a default"),
]


@pytest.mark.parametrize(
    ("name", "params", "shown", "fix"),
    [
        (name, *signature)
        for name in ("make_dataset", "make_model", "make_train_step")
        for signature in SIGNATURES
        # `def make_dataset():` is a plain file, not a mistake: see the plain-file tests.
        if (name, signature[0]) != ("make_dataset", "")
    ],
)
def test_functions_must_take_one_positional_argument(in_tmp, name, params, shown, fix):
    others = {"make_dataset", "make_model"} - {name}
    source = "".join(f"def {other}(knobs):\n    return 1\n" for other in others)
    write(in_tmp, source + f"def {name}({params}):\n    return 1\n")
    message = load_error("pipeline.py")
    assert message.startswith(
        f"pipeline.py: `{name}` must accept exactly one positional argument (the knobs), but its "
        f"signature is `{name}{shown}`."
    )
    assert fix.format(name=name) in message


@pytest.mark.parametrize("name", ["make_model", "make_train_step"])
def test_model_functions_not_callable(in_tmp, name):
    write(in_tmp, f"def make_dataset(knobs):\n    return 1\n{name} = 'resnet'\n")
    assert load_error("pipeline.py").startswith(f"pipeline.py: `{name}` is a str, not a function")


def test_neither_model_nor_train_step_explains_both(in_tmp):
    write(
        in_tmp, "def make_dataset(knobs):\n    return []\n\ndef build_model(knobs):\n    return 1\n"
    )
    message = load_error("pipeline.py")
    assert message.startswith(
        "pipeline.py defines neither `make_model` nor `make_train_step`; tfperf needs one of them"
    )
    assert "`make_model(knobs)` returning a compiled Keras model" in message
    assert "`make_train_step(knobs)` returning a callable that tfperf runs on each batch" in message
    assert "Functions found: make_dataset, build_model." in message


def test_without_a_model_the_message_offers_an_emulated_step(in_tmp):
    write(in_tmp, "def make_dataset(knobs):\n    return []\n")
    assert "give `--step-time` (e.g. `--step-time 5ms`): it needs no model" in load_error(
        "pipeline.py"
    )


def test_for_an_emulated_step_make_dataset_alone_is_a_pipeline_file(in_tmp):
    write(in_tmp, "BASELINE = {'batch_size': 4}\ndef make_dataset(knobs):\n    return []\n")
    pipeline = load_pipeline("pipeline.py", needs_step=False)
    assert pipeline.kind is PipelineKind.KNOBS and pipeline.baseline.batch_size == 4
    assert pipeline.make_model is None and pipeline.make_train_step is None


@pytest.mark.parametrize(("value", "kind"), [("[64]", "list"), ("64", "int"), ("'fast'", "str")])
def test_baseline_not_a_dict(in_tmp, value, kind):
    write(in_tmp, CONTRACT + f"BASELINE = {value}\n")
    message = load_error("pipeline.py")
    assert message.startswith("pipeline.py: BASELINE must be a dict of knob values")
    assert f"but it is a {kind} ({value})." in message


def test_baseline_unknown_name_lists_valid_names(in_tmp):
    write(in_tmp, CONTRACT + "BASELINE = {'batch': 64}\n")
    message = load_error("pipeline.py")
    assert message.startswith("pipeline.py: BASELINE: unknown knob name 'batch'.")
    assert "Valid names: batch_size, shuffle_buffer" in message


def test_baseline_bad_value(in_tmp):
    write(in_tmp, CONTRACT + "BASELINE = {'batch_size': 0}\n")
    assert load_error("pipeline.py") == (
        "pipeline.py: BASELINE: knob 'batch_size' must be an integer >= 1, but got 0."
    )


def test_search_space_errors_name_the_file(in_tmp):
    write(in_tmp, CONTRACT + "SEARCH_SPACE = {'prefetch': {'low': 3, 'high': 1}}\n")
    assert load_error("pipeline.py").startswith(
        "pipeline.py: SEARCH_SPACE: 'prefetch': `low <= high` must hold, but got (low=3, high=1)."
    )
    write(in_tmp, CONTRACT + "SEARCH_SPACE = {'bach_size': [32]}\n")
    message = load_error("pipeline.py")
    assert message.startswith("pipeline.py: SEARCH_SPACE: unknown knob name 'bach_size'.")
    assert "Valid names: batch_size" in message


def test_search_space_not_a_dict(in_tmp):
    write(in_tmp, CONTRACT + "SEARCH_SPACE = ['batch_size']\n")
    message = load_error("pipeline.py")
    assert message.startswith("pipeline.py: SEARCH_SPACE must be a dict")
    assert "but it is a list" in message


def test_knob_errors_are_chained(in_tmp):
    write(in_tmp, CONTRACT + "BASELINE = {'batch_size': -3}\n")
    with pytest.raises(PipelineFileError) as caught:
        load_pipeline("pipeline.py")
    assert type(caught.value.__cause__).__name__ == "KnobError"


# --- files whose code takes no knobs, and training scripts -----------------------------------


def test_plain_file_takes_no_knobs_and_fixes_the_knobs_only_code_reads(tmp_path):
    source = """
    def make_dataset():
        return "dataset"

    def make_model():
        return "model"

    BASELINE = {"mixed_precision": "mixed_bfloat16"}
    """
    pipeline = load_pipeline(write(tmp_path, source))
    assert pipeline.kind is PipelineKind.PLAIN
    assert pipeline.make_dataset is not None and pipeline.make_dataset(Knobs()) == "dataset"
    assert pipeline.make_model is not None and pipeline.make_model(Knobs()) == "model"
    assert pipeline.shown_call("make_dataset") == "make_dataset()"
    assert pipeline.search_space["batch_size"] == Fixed(32)
    assert pipeline.search_space["prefetch"] == Fixed(AUTOTUNE)
    assert "mixed_precision" not in pipeline.search_space
    assert pipeline.baseline.mixed_precision.value == "mixed_bfloat16"


def test_plain_file_may_still_pass_knobs_to_its_model(tmp_path):
    source = "def make_dataset():\n    return 1\ndef make_model(knobs):\n    return knobs\n"
    pipeline = load_pipeline(write(tmp_path, source))
    assert pipeline.shown_call("make_model") == "make_model(knobs)"
    assert pipeline.make_model is not None and pipeline.make_model(Knobs()) == Knobs()


def test_plain_file_baseline_cannot_set_knobs_nothing_reads(in_tmp):
    write(
        in_tmp,
        "def make_dataset():\n    return 1\nmake_model = make_dataset\n"
        "BASELINE = {'batch_size': 64}\n",
    )
    assert load_error("pipeline.py") == (
        "pipeline.py: BASELINE sets batch_size, but `make_dataset()` takes no knobs, so nothing "
        "would apply them. tfperf tunes the values written in your tf.data calls instead "
        "(`tfperf profile` lists them as call sites, e.g. batch@pipeline.py:LINE.batch_size): "
        "remove batch_size from BASELINE, or define `make_dataset(knobs)` and read them from "
        "the knobs."
    )


@pytest.mark.parametrize(
    "source",
    [
        "model = object()\nmodel.fit(1)\n",
        "if __name__ == '__main__':\n    print('training')\n",
    ],
    ids=["calls-fit", "main-guard"],
)
def test_a_training_script_is_recognised_without_running_it(tmp_path, source):
    marker = tmp_path / "ran"
    path = write(tmp_path, f"open({str(marker)!r}, 'w').close()\n" + source)
    pipeline = load_pipeline(path, ["--epochs", "3"])
    assert pipeline.kind is PipelineKind.SCRIPT
    assert (pipeline.module, pipeline.make_dataset) == (None, None)
    assert pipeline.argv == ("--epochs", "3")
    assert pipeline.search_space["num_parallel_calls"] == Fixed(AUTOTUNE)
    assert not marker.exists()


def test_a_file_with_contract_names_is_never_a_script(in_tmp):
    write(in_tmp, "def make_model(knobs):\n    return 1\nif __name__ == '__main__':\n    pass\n")
    assert load_error("pipeline.py").startswith("pipeline.py defines no `make_dataset`")
