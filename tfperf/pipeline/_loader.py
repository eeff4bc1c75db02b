"""Load a user's pipeline file hygienically; `contract` checks what it defines.

A pipeline file defines `make_dataset(knobs)` and `make_model(knobs)` or `make_train_step(knobs)`
(the train step wins when both exist), and optionally `BASELINE` (the knobs the user runs today) and
`SEARCH_SPACE` (what `tfperf tune` may change). A *plain* file's `make_dataset()` takes no knobs
(see `tfperf.pipeline._contract`). A file that defines none of these names but calls `fit` or has an
`if __name__ == "__main__":` block is a training *script*: it is not imported here, but run later by
its framework (`tfperf.frameworks.tensorflow._script`) up to its first `model.fit(...)`. A
framework may decide that itself (`Framework.is_script`): a PyTorch file without `make_loader` is
a script, whatever its top level does, since importing it would run its training loop. The file
is imported as a module under a unique name, so its `if __name__ == "__main__":` block does not
run, while its directory is first on `sys.path` and `sys.argv` is `[file, *argv]`, as if run
with `python file`. `sys.argv`, `sys.path` and the working directory are restored afterwards,
also when loading fails. Every problem raises `PipelineFileError` with a message that names the
file and the fix.

Modules a pipeline file imports from its own directory (a `helper.py`) are dropped from
`sys.modules` when a pipeline from another directory is loaded or called, so each file imports
its own `helper.py` even when both are named alike.

Example:
    >>> pipeline = load_pipeline("examples/quickstart/pipeline.py")  # doctest: +SKIP
    >>> dataset = pipeline.call(pipeline.make_dataset, pipeline.baseline)  # doctest: +SKIP
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import difflib
import hashlib
import importlib.util
import logging
import os
import re
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from enum import Enum
from pathlib import Path
from typing import Any, NoReturn, ParamSpec, TypeVar

from tfperf import frameworks
from tfperf.errors import PipelineFileError
from tfperf.knobs import Domain, Knobs
from tfperf.pipeline._contract import check_contract, fixed_code_knobs, is_script
from tfperf.results.discovery import Discovery
from tfperf.tracebacks import (
    exception_user_frames,
    format_frames,
    format_syntax_error,
    is_user_file,
    missing_module_hint,
)

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

_MODULE_PREFIX = "tfperf_pipeline_"
# Modules a pipeline file imported from its own directory (name -> that directory), so that a
# later pipeline elsewhere with a same-named `helper.py` imports its own, not the cached one.
_SIBLINGS: dict[str, Path] = {}


class PipelineKind(str, Enum):
    """How a file hands tfperf its pipeline, which decides what tfperf can tune."""

    KNOBS = "knobs"  # make_dataset(knobs): the code reads the knobs
    PLAIN = "plain"  # make_dataset(): values written in the calls, tuned as call sites
    SCRIPT = "script"  # a training script: run up to model.fit, its calls tuned as sites


@dataclasses.dataclass(frozen=True)
class PipelineFile:
    """A loaded pipeline file whose contract has been checked, or a training script.

    For a pipeline file, `make_model` or `make_train_step` may be None, never both unless it was
    loaded for an emulated step (`needs_step` False); each function takes the knobs
    (`without_knobs` names those the file defines without them, which ignore the knobs they are
    passed). `baseline` is `Knobs()` when the file has no `BASELINE` (then
    `has_baseline` is False); `search_space` is empty without a `SEARCH_SPACE`, and fixes the knobs
    only code applies when the code takes none (`kind` PLAIN or SCRIPT). A script has no module and
    no functions. `argv` is what the file sees after its own path in `sys.argv`. `discovery` holds
    the call sites once found (`tfperf.trials._discovery.with_sites`), and then the baseline's
    `sites` hold their values as written. `framework` names the framework that claimed it
    (`tfperf.frameworks`); `make_dataset` holds that framework's input function (a PyTorch
    file's `make_loader`).
    """

    path: Path
    name: str
    module: types.ModuleType | None = None
    baseline: Knobs = dataclasses.field(default_factory=Knobs)
    has_baseline: bool = False
    search_space: dict[str, Domain] = dataclasses.field(default_factory=dict)
    make_dataset: Callable[[Knobs], Any] | None = None
    make_model: Callable[[Knobs], Any] | None = None
    make_train_step: Callable[[Knobs], Any] | None = None
    argv: tuple[str, ...] = ()
    kind: PipelineKind = PipelineKind.KNOBS
    without_knobs: frozenset[str] = frozenset()
    discovery: Discovery | None = None
    framework: str = frameworks.DEFAULT

    @classmethod
    def of(cls, pipeline: object, framework: str) -> PipelineFile:
        """`pipeline` as `framework`'s `load` returned it: a `TypeError` for anything else."""
        if not isinstance(pipeline, cls):
            raise TypeError(
                f"the {framework} framework measures a PipelineFile (from its `load`), but got "
                f"{type(pipeline).__name__}"
            )
        return pipeline

    @property
    def owns_strategy(self) -> bool:
        """Whether it brings its own `tf.distribute` strategy: a script builds any it uses
        itself, and a pipeline file may define `make_strategy()`."""
        return self.kind is PipelineKind.SCRIPT or hasattr(self.module, "make_strategy")

    @property
    def user_paths(self) -> tuple[Path, ...]:
        """Where the user's code lives (the file's directory), for filtering tracebacks."""
        return (self.path.parent,)

    def shown_call(self, name: str) -> str:
        """How a call of the file's function `name` reads in messages: `make_dataset()`."""
        return f"{name}()" if name in self.without_knobs else f"{name}(knobs)"

    def with_discovery(self, discovery: Discovery) -> PipelineFile:
        """This file with its call sites found: their written values become the baseline's."""
        baseline = self.baseline.replace(sites=discovery.values())
        return dataclasses.replace(self, baseline=baseline, discovery=discovery)

    def call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Runs `fn` (usually one of the user's functions) as the file was loaded.

        The file's directory is first on `sys.path`, so imports inside the function find sibling
        modules, and `sys.argv` is `[path, *argv]`; both and the working directory are restored
        afterwards. Exceptions from `fn` propagate unchanged. Not thread-safe: `sys.path` and
        `sys.argv` are process-wide, so call user functions from one thread at a time.
        """
        with _pipeline_context(self.path, self.argv):
            return fn(*args, **kwargs)


def check_source(path: str | Path) -> Path:
    """The checks `load_pipeline` makes without running the file; returns its resolved path.

    Cheap (no TensorFlow, nothing of the file runs), so the CLI calls it first: a missing,
    binary, non-UTF-8 or syntactically broken file fails in milliseconds.

    Raises:
        PipelineFileError: as `load_pipeline`, for those problems.
    """
    shown = str(path)
    file = _check_file(Path(path))
    _parse(_read_source(file, shown), file, shown)
    return file


def load_pipeline(
    path: str | Path, argv: Sequence[str] = (), *, needs_step: bool = True
) -> PipelineFile:
    """Imports the pipeline file at `path` and checks its contract.

    Args:
        path: The user's .py file.
        argv: Arguments the file sees in `sys.argv[1:]` while it is imported and called.
        needs_step: False when the training step is emulated (`--step-time`): a file with
            `make_dataset` alone is then a whole pipeline file.

    Raises:
        PipelineFileError: the file is missing, not Python, not UTF-8, has a syntax error,
            raises on import, lacks or mis-declares a required function, or has an invalid
            `BASELINE` or `SEARCH_SPACE`.
    """
    shown = str(path)
    file = _check_file(Path(path))
    source = _read_source(file, shown)
    tree = _parse(source, file, shown)
    framework = frameworks.detect(file)
    script = framework.is_script(tree)
    if script or (script is None and is_script(tree)):
        logger.debug("%s is a training script: it runs when the pipeline is built", file)
        return _script(file, tuple(argv), framework.name)
    with framework.import_guard(tree, file, shown):  # training reached on import stops it
        module = _execute(_compile(tree, file, shown), file, shown, tuple(argv))
    try:
        checked = check_contract(module, shown, framework, needs_step=needs_step)
    except BaseException:
        sys.modules.pop(module.__name__, None)
        raise
    logger.debug("Loaded pipeline file %s as module %s", file, module.__name__)
    return PipelineFile(
        path=file,
        name=file.stem,
        module=module,
        baseline=checked.baseline,
        has_baseline=checked.has_baseline,
        search_space=checked.search_space,
        make_dataset=checked.make_dataset,
        make_model=checked.make_model,
        make_train_step=checked.make_train_step,
        argv=tuple(argv),
        kind=PipelineKind.PLAIN if checked.plain else PipelineKind.KNOBS,
        without_knobs=checked.without_knobs,
        framework=framework.name,
    )


def _script(file: Path, argv: tuple[str, ...], framework: str) -> PipelineFile:
    return PipelineFile(
        path=file,
        name=file.stem,
        search_space=fixed_code_knobs(),
        argv=argv,
        kind=PipelineKind.SCRIPT,
        framework=framework,
    )


@contextlib.contextmanager
def _pipeline_context(file: Path, argv: Sequence[str]) -> Iterator[None]:
    directory = file.parent
    saved_argv, saved_path, saved_entries = sys.argv, sys.path, list(sys.path)
    saved_cwd = os.getcwd()
    _forget_foreign_siblings(directory)
    modules_before = set(sys.modules)
    sys.argv = [str(file), *argv]
    sys.path.insert(0, str(directory))
    try:
        yield
    finally:
        _remember_siblings(set(sys.modules) - modules_before, directory)
        sys.argv = saved_argv
        sys.path = saved_path
        sys.path[:] = saved_entries
        os.chdir(saved_cwd)


def _remember_siblings(names: set[str], directory: Path) -> None:
    for name in names:
        if not name.startswith(_MODULE_PREFIX) and _lives_in(sys.modules.get(name), directory):
            _SIBLINGS[name] = directory


def _forget_foreign_siblings(directory: Path) -> None:
    for name, home in list(_SIBLINGS.items()):
        if home != directory:
            del _SIBLINGS[name]
            if _lives_in(sys.modules.get(name), home):
                del sys.modules[name]


def _lives_in(module: types.ModuleType | None, directory: Path) -> bool:
    filename = getattr(module, "__file__", None)
    return isinstance(filename, str) and is_user_file(filename, [directory])


def _check_file(given: Path) -> Path:
    if not given.exists():
        raise PipelineFileError(_missing_message(given))
    if given.is_dir():
        python_files = sorted(child.name for child in given.glob("*.py"))
        found = f"Python files there: {', '.join(python_files)}." if python_files else ""
        raise PipelineFileError(
            f"{given} is a directory, not a pipeline file. Point tfperf at the .py file in it "
            f"that defines `make_dataset(knobs)`. {found or 'It holds no .py file.'}"
        )
    if given.suffix != ".py":
        raise PipelineFileError(_not_python_message(given))
    return given.resolve()


def _missing_message(given: Path) -> str:
    where = "" if given.is_absolute() else f" (relative paths start from {Path.cwd()})"
    siblings = [c.name for c in given.parent.glob("*.py")] if given.parent.is_dir() else []
    close = difflib.get_close_matches(given.name, siblings, n=1, cutoff=0.6)
    guess = f" Did you mean {given.with_name(close[0])}?" if close else ""
    return (
        f"No such pipeline file: {given}. Check the path{where}.{guess} A pipeline file is a .py "
        "file defining `make_dataset(knobs)` and `make_model(knobs)` or `make_train_step(knobs)`."
    )


def _not_python_message(given: Path) -> str:
    suffix = f"'{given.suffix}'" if given.suffix else "no suffix"
    message = (
        f"{given} is not a Python file (expected a .py file, got {suffix}). tfperf imports the "
        "pipeline file as a Python module; point it at the .py file that defines "
        "`make_dataset(knobs)`."
    )
    if given.suffix == ".ipynb":
        message += f" To use a notebook, export it first: `jupyter nbconvert --to script {given}`."
    elif given.with_suffix(".py").is_file():
        message += f" Did you mean {given.with_suffix('.py')}?"
    return message


def _read_source(file: Path, shown: str) -> str:
    try:
        data = file.read_bytes()
    except OSError as error:
        raise PipelineFileError(
            f"Cannot read {shown}: {error.strerror}. Check that the file is readable by the user "
            "running tfperf."
        ) from error
    try:
        source = importlib.util.decode_source(data)
    except (SyntaxError, UnicodeDecodeError, LookupError) as error:
        raise PipelineFileError(_decode_message(data, shown, error)) from error
    if "\0" in source:
        raise PipelineFileError(
            f"{shown} is not Python source: it contains NUL bytes, so it looks like a binary "
            "file. Point tfperf at the .py file that defines `make_dataset(knobs)`."
        )
    return source


def _decode_message(data: bytes, shown: str, error: Exception) -> str:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as bad:
        line = data[: bad.start].count(b"\n") + 1
        return (
            f"{shown} is not UTF-8 text: line {line} holds byte {data[bad.start]:#04x}, which "
            f"UTF-8 cannot decode ({bad.reason}). Save the file as UTF-8, and check that it is "
            "the Python source, not a binary or compiled file."
        )
    return (
        f"{shown} declares an encoding Python cannot use ({error}). Remove or fix the "
        "`# -*- coding: ... -*-` line and save the file as UTF-8."
    )


def _parse(source: str, file: Path, shown: str) -> ast.Module:
    tree = _compile(source, file, shown, flags=ast.PyCF_ONLY_AST)
    assert isinstance(tree, ast.Module)
    return tree


def _compile(source: str | ast.Module, file: Path, shown: str, flags: int = 0) -> Any:
    try:
        # dont_inherit: this module's `from __future__` imports must not leak into user code.
        return compile(source, str(file), "exec", flags=flags, dont_inherit=True)
    except SyntaxError as error:
        raise PipelineFileError(
            f"{shown} has a syntax error, so tfperf cannot import it:\n"
            f"{_indent(format_syntax_error(error))}\n"
            f"Fix that line; `python -m py_compile {shown}` checks the file without running it."
        ) from error


def _execute(
    code: types.CodeType, file: Path, shown: str, argv: tuple[str, ...]
) -> types.ModuleType:
    name = _module_name(file)
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None:
        raise PipelineFileError(f"{shown}: Python cannot import this file as a module.")
    module = importlib.util.module_from_spec(spec)
    # Registered before running, so dataclasses and pickling in the user's code find it.
    sys.modules[name] = module
    try:
        with _pipeline_context(file, argv), _exit_refused():
            exec(code, module.__dict__)
    except BaseException as error:
        sys.modules.pop(name, None)
        if isinstance(error, _ProcessExit):
            raise PipelineFileError(
                f"{shown} called os._exit({error.code}) while tfperf imported it, which would "
                "end tfperf without a word. Top-level code runs on import: move it under "
                '`if __name__ == "__main__":`.'
            ) from None
        if isinstance(error, (Exception, SystemExit)):
            raise PipelineFileError(_import_message(error, file, shown, argv)) from error
        raise
    return module


class _ProcessExit(BaseException):
    """`os._exit(code)` called by the file while it was imported; raised instead of exiting."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


@contextlib.contextmanager
def _exit_refused() -> Iterator[None]:
    """While the file is imported, `os._exit` raises `_ProcessExit` instead of ending tfperf.

    `os._exit` skips every handler, so tfperf could not even say why it stopped.
    """
    real = os._exit

    def refuse(status: int) -> NoReturn:
        raise _ProcessExit(status)

    os._exit = refuse
    try:
        yield
    finally:
        os._exit = real


def _module_name(file: Path) -> str:
    stem = re.sub(r"\W", "_", file.stem)
    digest = hashlib.sha1(str(file).encode(), usedforsecurity=False).hexdigest()[:8]
    return f"{_MODULE_PREFIX}{stem}_{digest}"


def _import_message(error: BaseException, file: Path, shown: str, argv: tuple[str, ...]) -> str:
    if isinstance(error, SystemExit):
        return (
            f"{shown} called sys.exit({error.code!r}) while tfperf imported it. Top-level code "
            'runs on import: move script code under `if __name__ == "__main__":`. If it parses '
            f"arguments, it saw sys.argv = {[str(file), *argv]!r}; argparse exits on arguments it "
            "does not know, so give them defaults or use `parse_known_args()`."
        )
    if isinstance(error, SyntaxError):
        return (
            f"{shown} imports a module with a syntax error:\n"
            f"{_indent(format_syntax_error(error))}\nFix that line."
        )
    frames = format_frames(exception_user_frames(error, [file.parent]))
    headline = f"{shown} raised {type(error).__name__} while tfperf imported it: {error}"
    return "\n".join(part for part in (headline, frames, _import_fix(error, file)) if part)


def _import_fix(error: BaseException, file: Path) -> str:
    return missing_module_hint(error, file.parent) or (
        "Top-level code runs when tfperf imports the file: fix the error above, or move work "
        "that needs data or a device into `make_dataset` or `make_model`."
    )


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())
