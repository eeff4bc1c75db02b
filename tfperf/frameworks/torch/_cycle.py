"""Whether the script hands its DataLoader to `itertools.cycle`, read where it asks for batches.

```python
for step, (x, y) in zip(range(steps), itertools.cycle(loader)):
    ...
```

`itertools.cycle` iterates the loader once, keeps every batch of that pass, and then replays
them in the same order forever: after the first pass the script loads nothing, sees no new
shuffle or augmentation, and holds a whole pass of batches in RAM. tfperf serves the loop a
stream of fresh passes (`_script_iter.Profiled`), so its figures are those of loading each
pass, which the script as written does only once; the finding says so.

The rule reads the user's frame that asked for the loader's iterator (`itertools.cycle` is C,
so that is the frame calling it), and says "cycled" only where a call on that line is
`itertools.cycle` itself, given the loader by name or attribute: a generator of the user's
named `cycle` that restarts the loader is not it, and nothing of the user's is called here.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import itertools
import linecache
import os
import sys
import types
from pathlib import Path
from typing import Any

#: tfperf's own folder: its frames are not the code that asked for batches.
_OWN = str(Path(__file__).parents[2]) + os.sep


def cycled_at(loader: Any) -> str | None:
    """`train.py:21`, where the user's code running now passes `loader` to `itertools.cycle`;
    None where it does not, or the code does not say."""
    frame = _callers_frame()
    if frame is None:
        return None
    file, line = frame.f_code.co_filename, frame.f_lineno
    try:
        tree = ast.parse("".join(linecache.getlines(file)))
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and node.lineno <= line <= (node.end_lineno or node.lineno)
            and len(node.args) == 1
            and not node.keywords
            and _resolve(node.func, frame) is itertools.cycle
            and _resolve(node.args[0], frame) is loader
        ):
            return f"{Path(file).name}:{node.lineno}"
    return None


def _callers_frame() -> types.FrameType | None:
    """The innermost frame outside tfperf and torch: the code that asked for the iterator."""
    import torch

    skipped = (_OWN, str(Path(torch.__file__).parent) + os.sep)
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(skipped):
        frame = frame.f_back
    return frame


_MISSING = object()


def _resolve(node: ast.expr, frame: types.FrameType) -> Any:
    """The object a name or an attribute chain (`itertools.cycle`, `self.loader`) stands for in
    `frame`, read without running any code of the user's; `_MISSING` otherwise."""
    if isinstance(node, ast.Name):
        for scope in (frame.f_locals, frame.f_globals, vars(builtins)):
            if node.id in scope:
                return scope[node.id]
        return _MISSING
    if isinstance(node, ast.Attribute):
        owner = _resolve(node.value, frame)
        if owner is _MISSING:
            return _MISSING
        try:
            return inspect.getattr_static(owner, node.attr)
        except AttributeError:
            return _MISSING
    return _MISSING
