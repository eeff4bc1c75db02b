"""Whether a script builds its DataLoader anew for every pass, read from the script's syntax.

```python
for epoch in range(epochs):
    loader = DataLoader(dataset, batch_size=32, num_workers=4)
    for x, y in loader:  # or train_one_epoch(model, loader)
        ...
```

Each pass of such a loop iterates a new DataLoader, which starts its workers again whatever it
is passed: `persistent_workers=True` keeps nothing. tfperf serves the loop one stream of the
first loader's passes (`_script_iter.Profiled`), so it must start that loader's workers anew at
each pass too, or it would measure a gain the script cannot have. The rule says "anew" only where
the syntax leaves no doubt: the call's value is bound to a name inside a loop, and every use of
that name in the loop is at the loop's own level (not inside a loop nested in it, as an epoch
loop inside a loop over folds would be). A loader a helper function builds is not read.

Example:
    >>> built_anew(Path("train.py"), 18)  # doctest: +SKIP
    'train.py:16'
"""

from __future__ import annotations

import ast
from pathlib import Path

_LOOPS = (ast.For, ast.AsyncFor, ast.While)


def built_anew(file: Path, line: int) -> str | None:
    """The loop (`train.py:16`) that builds the DataLoader called at `file`'s `line` for each
    of its passes; None where it is built once, or the syntax does not say."""
    try:
        tree = ast.parse(file.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    for loop in ast.walk(tree):
        if isinstance(loop, _LOOPS):
            name = _bound_in(loop, line)
            if name is not None and _used_each_pass(loop, name):
                return f"{file.name}:{loop.lineno}"
    return None


def _bound_in(loop: ast.AST, line: int) -> str | None:
    """The name the loop's own body (not a loop nested in it) binds to the call at `line`."""
    for statement in _own(loop):
        if (
            isinstance(statement, ast.Assign)
            and isinstance(statement.value, ast.Call)
            and statement.value.lineno <= line <= (statement.value.end_lineno or line)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
        ):
            return statement.targets[0].id
    return None


def _used_each_pass(loop: ast.AST, name: str) -> bool:
    """Whether `name` is read in the loop, and only at its level: in its own statements or
    in the iterable of a loop directly in it (`for x in loader`), never in a nested loop's
    body."""
    used = False
    for statement in _own(loop):
        for node in ast.walk(statement):
            if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load):
                used = True
        if isinstance(statement, _LOOPS) and _reads(statement, name):
            return False
    return used


def _reads(loop: ast.For | ast.AsyncFor | ast.While, name: str) -> bool:
    """Whether `loop`'s body (not its iterable) reads `name`: the loader outlives its passes."""
    return any(
        isinstance(node, ast.Name) and node.id == name
        for statement in loop.body
        for node in ast.walk(statement)
    )


def _own(loop: ast.AST) -> list[ast.stmt]:
    """The statements a loop runs at its own level: its body, and the bodies of the `if`,
    `with` and `try` blocks in it, but not loops', functions' or classes' bodies."""
    found: list[ast.stmt] = []
    pending = list(getattr(loop, "body", []))
    while pending:
        statement = pending.pop(0)
        found.append(statement)
        if isinstance(statement, (ast.If, ast.With, ast.AsyncWith, ast.Try)):
            for block in ("body", "orelse", "finalbody"):
                pending.extend(getattr(statement, block, []))
            for handler in getattr(statement, "handlers", []):
                pending.extend(handler.body)
    return found
