"""Whether a script hands its data to `itertools.cycle`, read where it asks for the iterator.

```python
for step, (x, y) in zip(range(steps), itertools.cycle(loader)):  # or a tf.data dataset
    ...
```

`itertools.cycle` iterates its argument once, keeps every batch of that pass, and then replays
them in the same order forever: after the first pass the script loads nothing, sees no new
shuffle or augmentation, and holds a whole pass of batches in RAM. A served loop (`ServedLoop`)
hands the script a stream of fresh passes, so the profile's figures are those of loading each
pass, which the script as written does only once; the rule `cycled` says so.

The user's frame that asked for the iterator is the one calling `itertools.cycle` (it is C, so
no frame of its own lies between). "Cycled" is said only where a call on that frame's line is
`itertools.cycle` itself, given the data by name or attribute: a generator of the user's named
`cycle` that restarts its data is not it, and nothing of the user's is run to tell.
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import itertools
import linecache
import types
from pathlib import Path
from typing import Any

_MISSING = object()


def cycled_at(frame: types.FrameType, data: Any) -> str | None:
    """`train.py:21`, where the code running in `frame` (the user's, asking for `data`'s
    iterator) passes `data` to `itertools.cycle`; None where it does not, or cannot tell."""
    file, line = frame.f_code.co_filename, frame.f_lineno
    for node in _calls("".join(linecache.getlines(file))):
        if (
            node.lineno <= line <= (node.end_lineno or node.lineno)
            and len(node.args) == 1
            and not node.keywords
            and _resolve(node.func, frame) is itertools.cycle
            and _resolve(node.args[0], frame) is data
        ):
            return f"{Path(file).name}:{node.lineno}"
    return None


@functools.lru_cache(maxsize=8)
def _calls(source: str) -> tuple[ast.Call, ...]:
    """The calls in `source`, parsed once: a loop asks at every epoch's `iter()`."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return ()
    return tuple(node for node in ast.walk(tree) if isinstance(node, ast.Call))


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
