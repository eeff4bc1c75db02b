"""A training script run as `python train.py ARGS` runs it: its code in a module named `__main__`.

`runpy.run_path(file, run_name="__main__")` installs that module only while the file's code runs.
tfperf goes on using what the script built after stopping it (a DataLoader iterated alone, a
model's `fit`), so here the module stays installed until the block ends. Then pickle finds the
script's own classes as `__main__.Name`, and a DataLoader worker started by spawn or forkserver
(Python 3.14's default on Linux) runs the script again as `__mp_main__` to find them, exactly as
under `python train.py`.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import importlib.machinery
import sys
import types
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from tfperf.pipeline._loader import _pipeline_context

#: The modules `run_as_main` made, so that a block inside another for the same file (the
#: script run inside a whole profile that goes on using its loader) shares the outer's.
_MADE: weakref.WeakSet[types.ModuleType] = weakref.WeakSet()


@contextlib.contextmanager
def run_as_main(file: Path, argv: Sequence[str]) -> Iterator[Callable[[], None]]:
    """The process as `python FILE ARGV` sets it up, for the block: `sys.argv`, `sys.path[0]`,
    and `sys.modules["__main__"]` a fresh module for `file` (or the one an enclosing block made
    for it); yields the call that runs the file's code in that module (it raises what the code
    raises). All restored afterwards, and the working directory too."""
    file = file.resolve()
    outer = sys.modules.get("__main__")
    if outer is not None and outer in _MADE and outer.__dict__.get("__file__") == str(file):
        with _pipeline_context(file, argv):
            yield functools.partial(_run, file, outer)
        return
    module = types.ModuleType("__main__")
    _MADE.add(module)
    module.__dict__.update(
        __file__=str(file),
        __cached__=None,
        __builtins__=builtins,
        __loader__=importlib.machinery.SourceFileLoader("__main__", str(file)),
    )

    sys.modules["__main__"] = module
    try:
        with _pipeline_context(file, argv):
            yield functools.partial(_run, file, module)
    finally:
        if outer is not None:
            sys.modules["__main__"] = outer


def _run(file: Path, module: types.ModuleType) -> None:
    """`file`'s code, compiled when it is run (a block that only holds the module, as a whole
    profile's does, compiles nothing), in `module`."""
    exec(compile(file.read_bytes(), str(file), "exec", dont_inherit=True), module.__dict__)
