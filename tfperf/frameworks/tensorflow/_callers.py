"""Where a tf.data call came from, and how it passed its arguments.

`_recording` asks this for every call it intercepts. The frame that made the call says
who made it: the user's code, tf.data itself, AutoGraph, or a library. For the user's own code,
Python 3.11's code positions give the exact span of the call expression, which `tfperf.sites._patch`
later finds again in the file's syntax tree.

TensorFlow is imported inside functions.
"""

from __future__ import annotations

import ast
import functools
import inspect
import logging
import os
import types
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any

from tfperf.frameworks.tensorflow import _tf
from tfperf.knobs import format_site_value
from tfperf.results.discovery import ArgumentForm
from tfperf.sites import callee, name_line
from tfperf.tracebacks import is_user_file, user_frame

logger = logging.getLogger(__name__)

#: The tfperf package: its own frames (the wrappers, `_tf`) are never the caller.
_TFPERF_DIR = Path(__file__).resolve().parents[2]


class Caller(str, Enum):
    """Who made a call, which decides what tfperf does with it."""

    USER = "user"  # a file under the pipeline's folder: a call site
    TF_DATA = "tf.data"  # tf.data's own work (a reader interleaving files), or tfperf's: skip
    AUTOGRAPH = "autograph"  # inside a function tf.data traced: map back to the user's line
    LIBRARY = "library"  # Keras, TFDS, ...: not tunable here


def classify(filename: str, root: Path) -> Caller:
    """Who made a call from `filename`, for a pipeline in folder `root`."""
    if is_user_file(filename, [root]):
        return Caller.USER
    if _under(filename, _tf_dir("autograph")):
        return Caller.AUTOGRAPH
    if _under(filename, _tf_dir("data")) or _under(filename, _TFPERF_DIR):
        return Caller.TF_DATA
    return Caller.LIBRARY


def call_ordinal(
    filename: str, method: str, line: int, end_line: int | None, end_col: int | None
) -> int | None:
    """Which of the `method(...)` calls named on `line` this is (1, 2, ... by where each
    ends), from the file's syntax tree; None when the line holds one, or the end is unknown.

    `ds.map(f).map(g)` on one line gives both calls the same start: only the source tells
    them apart, and it does so the same way in every process that builds the pipeline.
    """
    if end_line is None or end_col is None:
        return None
    ends = _call_ends(filename, _mtime(filename)).get((line, method), [])
    if len(ends) < 2 or (end_line, end_col) not in ends:
        return None
    return ends.index((end_line, end_col)) + 1


def calls_on_line(filename: str, method: str, line: int) -> int:
    """How many `method(...)` calls are named on `line` of the file, from its syntax tree."""
    return len(_call_ends(filename, _mtime(filename)).get((line, method), []))


@functools.lru_cache(maxsize=64)
def _call_ends(filename: str, mtime: float) -> dict[tuple[int, str], list[tuple[int, int]]]:
    try:
        tree = ast.parse(Path(filename).read_bytes())
    except (OSError, SyntaxError, ValueError):
        return {}
    ends: dict[tuple[int, str], list[tuple[int, int]]] = {}
    for node in ast.walk(tree):
        name = callee(node) if isinstance(node, ast.Call) else None
        if isinstance(node, ast.Call) and name is not None:
            end = (node.end_lineno or 0, node.end_col_offset or 0)
            ends.setdefault((name_line(node), name), []).append(end)
    return {key: sorted(value) for key, value in ends.items()}


def _mtime(filename: str) -> float:
    try:
        return os.stat(filename).st_mtime
    except OSError:
        return 0.0


def inside_tensorflow(filename: str) -> bool:
    """Whether `filename` is TensorFlow's own code (tf.data, tf.distribute, AutoGraph...) or
    tfperf's."""
    return _under(filename, _tf_dir("")) or _under(filename, _TFPERF_DIR)


def autograph_origin() -> tuple[str, int] | None:
    """The file and line, outside TensorFlow, of a call made in code AutoGraph converted.

    AutoGraph runs generated code; TensorFlow's own stack extraction (`_tf.traced_stack`)
    maps its frames back to the source lines they came from (not columns). None when no such
    frame exists.

    Raises:
        ImportError, AttributeError: TensorFlow moved its private stack module; callers say
            the call could not be mapped rather than guess.
    """
    for filename, line in reversed(_tf.traced_stack()):
        if not inside_tensorflow(filename):
            return filename, line
    return None


def user_line(frame: types.FrameType | None, root: Path) -> tuple[str, int] | None:
    """The innermost frame on the stack in the user's files: its file and line."""
    found = user_frame(frame, (root,))
    return (found.f_code.co_filename, found.f_lineno) if found is not None else None


def argument_form(
    argument: str,
    signature: inspect.Signature,
    bound: inspect.BoundArguments,
    kwargs: dict[str, Any],
) -> tuple[ArgumentForm, int | None]:
    """How a call passed `argument`, and its position among the call's arguments if positional."""
    if argument in kwargs:
        return ArgumentForm.KEYWORD, None
    if argument in bound.arguments:
        # Positions count the call's own arguments, after `self`.
        return ArgumentForm.POSITIONAL, list(signature.parameters).index(argument) - 1
    return ArgumentForm.ABSENT, None


def plain_value(value: Any, argument: str) -> tuple[int | None, str | None]:
    """An argument as a Python int (or None), or why it is not one tfperf can tune."""
    if value is None:
        return None, None
    if isinstance(value, bool):
        return None, f"its {argument} is a bool, not an integer"
    try:
        return int(value.__index__()), None
    except (AttributeError, TypeError):
        kind = type(value).__name__
        return None, (
            f"its {argument} is a {kind}, not a Python integer; tfperf tunes values written "
            "as numbers (or variables holding one)"
        )


def single_file(arguments: Mapping[str, Any]) -> bool:
    """Whether a reader's `filenames` is one file, which no `num_parallel_reads` can speed up."""
    filenames = arguments.get("filenames")
    if isinstance(filenames, (str, bytes, os.PathLike)):
        return True
    if isinstance(filenames, (list, tuple)):
        return len(filenames) <= 1
    shape = getattr(filenames, "shape", None)
    return shape is not None and getattr(shape, "rank", None) == 0


def call_text(method: str, arguments: list[str], bound: inspect.BoundArguments) -> str:
    """A call as a person reads it in a list: `batch(batch_size=4)`."""
    given = [
        f"{argument}={_shown(bound.arguments[argument])}"
        for argument in arguments
        if argument in bound.arguments
    ]
    return f"{method}({', '.join(given)})"


def _shown(value: Any) -> str:
    plain, problem = plain_value(value, "")
    return type(value).__name__ if problem else format_site_value(plain).split(" ")[0]


def library_path(filename: str) -> str:
    """A library file from its package on (`keras/src/...py`), else as given."""
    parts = Path(filename).parts
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            last = len(parts) - 1 - parts[::-1].index(marker)
            return "/".join(parts[last + 1 :])
    return filename


@functools.cache
def _tf_dir(sub: str) -> Path:
    return _tf.tensorflow_dir(sub).resolve()


def _under(filename: str, directory: Path) -> bool:
    return Path(os.path.realpath(filename)).is_relative_to(directory)
