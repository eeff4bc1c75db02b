"""Show the user's own lines of a traceback, not TensorFlow's or tfperf's.

When a pipeline file fails, the useful frames are the few in the user's files. These helpers
pick them out (by resolved path) and render them one per line:

    pipeline.py:23 in parse: image = tf.io.decode_jpeg(x)

Frames in the standard library, in installed packages (site-packages) and in tfperf itself never
count as the user's, even when the user's directory contains them (a project-local `.venv`).

Example:
    >>> try:  # doctest: +SKIP
    ...     pipeline.call(pipeline.make_dataset, knobs)
    ... except Exception as error:
    ...     print(describe_exception(error, pipeline.user_paths))
"""

from __future__ import annotations

import functools
import os
import re
import sys
import sysconfig
import threading
import traceback
import types
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any

__all__ = [
    "describe_exception",
    "drop_library_frames",
    "exception_headline",
    "exception_user_frames",
    "format_frames",
    "format_syntax_error",
    "is_user_file",
    "missing_module_hint",
    "user_frames",
]

_TFPERF_DIR = Path(__file__).resolve().parent
_INSTALLED_DIR_NAMES = frozenset({"site-packages", "dist-packages"})
# A frame line as Python and TensorFlow write them into error texts.
_FRAME_LINE = re.compile(r'^\s*File "(?P<file>[^"]+)", line \d+, in ')
# An exception a PyTorch DataLoader worker raised, as the trainer re-raises it: torch's
# `ExceptionWrapper` carries only the worker's formatted traceback, as text.
_WORKER_ERROR = re.compile(
    r"^Caught (?P<type>[\w.]+) in (?P<where>[^\n]+?)\.\n"
    r"Original Traceback \(most recent call last\):\n(?P<traceback>.*)$",
    re.DOTALL,
)
# One frame of a formatted traceback: its `File` line and, indented below, its source line.
_TEXT_FRAME = re.compile(
    r'^  File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<name>[^\n]+)\n'
    r"(?:    (?P<code>[^\n]*)\n)?",
    re.MULTILINE,
)
# Import names whose pip package is named otherwise, for the "install it" hint.
_PIP_NAMES = {
    "cv2": "opencv-python",
    "PIL": "pillow",
    "sklearn": "scikit-learn",
    "yaml": "pyyaml",
    "tensorflow_datasets": "tensorflow-datasets",
    "tensorflow_io": "tensorflow-io",
}


def user_frames(
    frames: Iterable[traceback.FrameSummary | tuple[Any, ...]], user_paths: Collection[Path]
) -> list[traceback.FrameSummary]:
    """Keeps the frames whose file is one of `user_paths` or lies in one of them (a directory).

    Args:
        frames: `FrameSummary` objects, `(filename, lineno, name[, line])` tuples, or objects
            with those attributes (TensorFlow's `op.traceback` frames).
        user_paths: The user's files and directories; compared after resolving symlinks.

    Returns:
        The kept frames, in their original order (outermost first).
    """
    roots = tuple(_resolve(str(path)) for path in user_paths)
    kept = []
    for frame in frames:
        summary = _summary(frame)
        if _is_user_file(summary.filename, roots):
            kept.append(summary)
    return kept


def user_frame(
    frame: types.FrameType | None, user_paths: Collection[Path]
) -> types.FrameType | None:
    """The innermost frame on the stack from `frame` out whose file is the user's, or None."""
    roots = tuple(_resolve(str(path)) for path in user_paths)
    while frame is not None and not _is_user_file(frame.f_code.co_filename, roots):
        frame = frame.f_back
    return frame


def user_place(frame: types.FrameType | None, user_paths: Collection[Path]) -> str:
    """The innermost of the user's lines on the stack, e.g. `train.py:41` (its file's name).

    Called on a thread the user's code started through a library (a `MirroredStrategy` runs
    each replica's step on a thread of its own), whose stack holds none of the user's
    lines: the innermost on the main thread's stack, the line waiting on that thread.
    """
    found = user_frame(frame, user_paths)
    if found is None and threading.current_thread() is not threading.main_thread():
        main = sys._current_frames().get(threading.main_thread().ident or 0)
        found = user_frame(main, user_paths)
    if found is None:
        return "an unknown line"
    return f"{Path(found.f_code.co_filename).name}:{found.f_lineno}"


def is_user_file(filename: str, user_paths: Collection[Path]) -> bool:
    """Whether `filename` is one of `user_paths` or lies in one, and is not library code."""
    return _is_user_file(filename, tuple(_resolve(str(path)) for path in user_paths))


def exception_user_frames(
    error: BaseException, user_paths: Collection[Path]
) -> list[traceback.FrameSummary]:
    """The user's frames of `error`'s traceback.

    When the error itself passed through none of the user's code (it was re-raised by a
    library), the frames of its cause or context are used instead, if they have any.
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        # An error a DataLoader worker raised crossed a process: its frames are text.
        frames = user_frames(_worker_frames(current), user_paths)
        frames = frames or user_frames(traceback.extract_tb(current.__traceback__), user_paths)
        if frames:
            return frames
        current = current.__cause__ or (
            None if current.__suppress_context__ else current.__context__
        )
    return []


def exception_headline(error: BaseException) -> str:
    """`Type: message` of `error`, as the user's code raised it.

    An exception a PyTorch DataLoader worker raised reaches the trainer re-raised, its
    message the worker's whole traceback ("Caught KeyError in DataLoader worker process 1.
    Original Traceback ..."): its headline is the worker's own last line, and where it was
    raised.

    Example:
        >>> exception_headline(KeyError("no label"))
        "KeyError: 'no label'"
    """
    worker = _WORKER_ERROR.match(str(error))
    if worker is not None:
        text = worker.group("traceback")
        end = max((frame.end() for frame in _TEXT_FRAME.finditer(text)), default=0)
        raised = text[end:].strip() or worker.group("type")
        return f"{raised} (raised in {worker.group('where')})"
    message = str(error)
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def _worker_frames(error: BaseException) -> list[traceback.FrameSummary]:
    """The frames of a DataLoader worker's traceback carried in `error`'s message; none for
    any other error."""
    worker = _WORKER_ERROR.match(str(error))
    if worker is None:
        return []
    return [
        traceback.FrameSummary(
            frame["file"], int(frame["line"]), frame["name"], line=frame["code"] or None
        )
        for frame in _TEXT_FRAME.finditer(worker.group("traceback"))
    ]


def format_frames(frames: Iterable[traceback.FrameSummary], limit: int = 3) -> str:
    """Renders the last `limit` frames (nearest the error), one per line, indented by two.

    Example:
        >>> frame = traceback.FrameSummary("/p/pipeline.py", 23, "parse", line="x = f(y)")
        >>> format_frames([frame])
        '  pipeline.py:23 in parse: x = f(y)'
    """
    frames = list(frames)
    shown = frames[-limit:] if limit > 0 else []
    lines = [_format_frame(frame) for frame in shown]
    hidden = len(frames) - len(shown)
    if hidden:
        lines.insert(0, f"  ... ({hidden} earlier frame{'s' if hidden > 1 else ''})")
    return "\n".join(lines)


def describe_exception(error: BaseException, user_paths: Collection[Path], limit: int = 3) -> str:
    """`Type: message` followed by the user's frames (or the syntax error's line and caret)."""
    if isinstance(error, SyntaxError):
        return format_syntax_error(error)
    headline = exception_headline(error)
    frames = format_frames(exception_user_frames(error, user_paths), limit)
    return f"{headline}\n{frames}" if frames else headline


def drop_library_frames(message: str) -> str:
    """An error text with the frames of libraries and of tfperf taken out, and blank lines.

    TensorFlow writes Python frames into its messages: a graph error lists where the failing
    node was defined (`Detected at node X defined at (most recent call last):`), and a
    `tf.numpy_function` that raised carries the Python traceback of its call. Most of those
    frames are TensorFlow's (`script_ops.py`, `autograph/impl/api.py`) or tfperf's own; the
    user's frames and the error's own text are what remain.

    Example:
        >>> drop_library_frames(  # doctest: +NORMALIZE_WHITESPACE
        ...     'Traceback (most recent call last):\\n'
        ...     '  File "/usr/lib/python3/site-packages/tf/script_ops.py", line 9, in __call__\\n'
        ...     '    ret = func(*args)\\n'
        ...     '  File "/home/me/pipeline.py", line 7, in parse\\n'
        ...     '    raise ValueError("bad")\\n'
        ...     'ValueError: bad'
        ... ).splitlines()[1:]
        ['  File "/home/me/pipeline.py", line 7, in parse',
         '    raise ValueError("bad")', 'ValueError: bad']
    """
    lines = message.splitlines()
    kept: list[str] = []
    index = 0
    while index < len(lines):
        match = _FRAME_LINE.match(lines[index])
        if match is None:
            if lines[index].strip():
                kept.append(lines[index])
            index += 1
            continue
        end = index + 1  # the frame's source line and caret marks, indented deeper
        while (
            end < len(lines) and lines[end].startswith("    ") and not _FRAME_LINE.match(lines[end])
        ):
            end += 1
        name = match.group("file")
        if not name.startswith("<") and not _is_library_file(_resolve(name)):
            kept.extend(line for line in lines[index:end] if line.strip())
        index = end
    return "\n".join(kept)


def missing_module_hint(error: BaseException, user_dir: Path) -> str:
    """How to fix a `ModuleNotFoundError` raised by user code in `user_dir`; "" for others.

    Example:
        >>> print(missing_module_hint(ModuleNotFoundError(name="cv2"), Path("/p")))
        ... # doctest: +NORMALIZE_WHITESPACE +ELLIPSIS
        If `cv2` is a package, install it into the Python that runs tfperf:
        `... -m pip install opencv-python`. If it is your own module, put cv2.py or a cv2/
        package in /p; tfperf puts that directory first on sys.path.
    """
    if not isinstance(error, ModuleNotFoundError) or not error.name:
        return ""
    top = error.name.split(".")[0]
    return (
        f"If `{top}` is a package, install it into the Python that runs tfperf: "
        f"`{sys.executable} -m pip install {_PIP_NAMES.get(top, top)}`. If it is your own "
        f"module, put {top}.py or a {top}/ package in {user_dir}; tfperf puts that directory "
        "first on sys.path."
    )


def format_syntax_error(error: SyntaxError) -> str:
    """`file, line N: Type: message`, then the offending line and a caret under the mistake.

    Example:
        >>> try:
        ...     compile("x = [1 2]", "/p/pipeline.py", "exec")
        ... except SyntaxError as error:
        ...     print(format_syntax_error(error))
        pipeline.py, line 1: SyntaxError: invalid syntax. Perhaps you forgot a comma?
            x = [1 2]
                 ^^^
    """
    where = f"{Path(error.filename or '<unknown>').name}, line {error.lineno}"
    lines = [f"{where}: {type(error).__name__}: {error.msg}"]
    text = (error.text or "").rstrip("\n")
    if text.strip():
        stripped = text.lstrip()
        lines.append(f"    {stripped.rstrip()}")
        caret = _caret(error, indent=len(text) - len(stripped))
        if caret:
            lines.append(f"    {caret}")
    return "\n".join(lines)


def _caret(error: SyntaxError, indent: int) -> str:
    if not error.offset or error.offset < 1:
        return ""
    start = max(error.offset - 1 - indent, 0)
    width = 1
    same_line = error.end_lineno in (None, error.lineno)
    if error.end_offset and same_line and error.end_offset > error.offset:
        width = error.end_offset - error.offset
    return " " * start + "^" * width


def _format_frame(frame: traceback.FrameSummary) -> str:
    location = f"  {Path(frame.filename).name}:{frame.lineno} in {frame.name}"
    line = (frame.line or "").strip()
    return f"{location}: {line}" if line else location


def _summary(frame: Any) -> traceback.FrameSummary:
    if isinstance(frame, traceback.FrameSummary):
        return frame
    if hasattr(frame, "filename") and hasattr(frame, "lineno"):  # e.g. TensorFlow's StackFrame
        filename, lineno, name = frame.filename, frame.lineno, getattr(frame, "name", "?")
        line = getattr(frame, "line", None)
    else:
        filename, lineno, name, *rest = frame
        line = rest[0] if rest else None
    # An empty line means "unknown": None lets FrameSummary read it from the file.
    return traceback.FrameSummary(str(filename), lineno, str(name), line=line or None)


def _is_user_file(filename: str, roots: tuple[Path, ...]) -> bool:
    if not filename or filename.startswith("<"):
        return False
    path = _resolve(filename)
    if _is_library_file(path):
        return False
    return any(path == root or path.is_relative_to(root) for root in roots)


def _is_library_file(path: Path) -> bool:
    if _INSTALLED_DIR_NAMES.intersection(path.parts):
        return True
    return any(path.is_relative_to(root) for root in _library_roots())


@functools.cache
def _library_roots() -> tuple[Path, ...]:
    names = ("stdlib", "platstdlib", "purelib", "platlib")
    paths = sysconfig.get_paths()
    return (_TFPERF_DIR, *{_resolve(paths[name]) for name in names if name in paths})


def _resolve(filename: str) -> Path:
    # Made absolute first, so the cache never keeps a relative name from an old directory.
    return _resolve_absolute(os.path.abspath(filename))


@functools.lru_cache(maxsize=4096)
def _resolve_absolute(filename: str) -> Path:
    # Tracebacks repeat the same few files; resolving each once keeps filtering cheap.
    return Path(filename).resolve()
