"""Where a call in the user's files is: the frame making it, matched to its syntax.

A frame records the instruction it is running; Python 3.11's positions give that call's span,
and the file's syntax tree (parsed once per version of the file) holds the `ast.Call` that
ends there. The recorder names a `DataLoader(...)` call by it (`_sites`), and the option
tracer reads the arguments of the user's call that reached a library (`_arguments`).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import os
import types
from pathlib import Path

from tfperf import frameworks
from tfperf.frameworks import call_span

#: The call recorded, as site names spell it.
CALL = "DataLoader"


@dataclasses.dataclass(frozen=True)
class Place(frameworks.Place):
    """Where a value is written, and in which call. A site's knobs are named by the place,
    always as the `DataLoader` argument they tune (`DataLoader@FILE:LINE.ARG`)."""

    #: The call the value is written in, and its argument there (None: the one tuned):
    #: `add_argument` and `default` for a value a library gets from an argparse option.
    call: str = CALL
    written: str | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


def call_of(frame: types.FrameType) -> ast.Call | None:
    """The call `frame` is making, from its file's syntax; None where it cannot be told."""
    _, end_line, _, end_col = call_span(frame)
    if end_line is None:
        return None
    found = [
        call
        for call in calls_in(frame.f_code.co_filename)
        if (call.end_lineno, call.end_col_offset) == (end_line, end_col)
    ]
    return found[0] if len(found) == 1 else None


def calls_in(filename: str) -> tuple[ast.Call, ...]:
    """Every call in the file, as its syntax tree holds them (none where it cannot be read)."""
    try:
        mtime = os.path.getmtime(filename)
    except OSError:
        return ()
    return _parsed(filename, mtime)


@functools.lru_cache(maxsize=32)
def _parsed(filename: str, mtime: float) -> tuple[ast.Call, ...]:
    try:
        tree = ast.parse(Path(filename).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError):
        return ()
    return tuple(node for node in ast.walk(tree) if isinstance(node, ast.Call))
