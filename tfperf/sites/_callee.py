"""The called name of a call in a syntax tree, and the line a person reads it on.

The recorder names a call by the line of its method name (Python 3.11 starts a call's span
there); the patch finds the call again in the file's tree by the same two facts.
"""

from __future__ import annotations

import ast


def callee(call: ast.Call) -> str | None:
    """The called name: `map` for `ds.map(...)`, `TFRecordDataset` for `TFRecordDataset(...)`."""
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    if isinstance(call.func, ast.Name):
        return call.func.id
    return None


def name_line(call: ast.Call) -> int:
    """The line of the called name: for `ds\\n.map(...)`, the line of `map`."""
    return call.func.end_lineno or call.func.lineno
