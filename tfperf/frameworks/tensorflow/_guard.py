"""Importing a pipeline file never trains: a `fit` or a step that starts during the import is
stopped.

`is_script` already sends a file with a top-level `fit` (or a step of its own loop) to the
script runner, from its syntax. What the syntax cannot see is training reached at run time: a
`main()` called at the top of a file that also defines the contract, a helper module that
trains when imported. While tfperf imports a file it took for a pipeline file,
`keras.Model.fit` (which `tf.keras` shares under Keras 3), `keras.Model.train_on_batch`, a
Keras optimizer's `apply_gradients` and `apply`, and `tf.GradientTape.gradient` raise instead
of training, and the import fails with a message naming the file, the line that trained and
the fix.

Keras is imported only when the file could reach it: it imports TensorFlow, Keras, or a module
of its own folder (which may); a file importing none of them loads without TensorFlow.
"""

from __future__ import annotations

import ast
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tfperf.errors import PipelineFileError
from tfperf.frameworks.tensorflow._tf import patched
from tfperf.pipeline import defines_contract
from tfperf.tracebacks import user_place

#: Top-level packages through which a file can reach `keras.Model.fit`.
_TRAINING_PACKAGES = frozenset({"tensorflow", "keras", "tf_keras"})


class _FitDuringImport(BaseException):
    """Raised by `fit` (or a training step, `what`) while a pipeline file is imported. A
    BaseException, so the file's own `except Exception:` lets it through."""

    def __init__(self, where: str, what: str = "fit") -> None:
        super().__init__(where)
        self.where = where
        self.what = what


def may_train(tree: ast.Module, folder: Path) -> bool:
    """Whether the file imports TensorFlow, Keras, or a module of its own folder (or Keras is
    loaded already, when guarding costs nothing)."""
    if "keras" in sys.modules:
        return True
    for node in ast.walk(tree):
        for name in _imported(node):
            top = name.split(".")[0]
            if top in _TRAINING_PACKAGES:
                return True
            if (folder / f"{top}.py").exists() or (folder / top).is_dir():
                return True
    return False


@contextlib.contextmanager
def fit_refused(tree: ast.Module, file: Path, shown: str) -> Iterator[None]:
    """While the block imports `file`, a call that trains (`keras.Model.fit`,
    `train_on_batch`, a Keras optimizer's `apply_gradients` or `apply`, a tape's
    `gradient`) stops the import.

    Raises:
        PipelineFileError: the file (or a module it imports) trained on import.
    """
    if not may_train(tree, file.parent):
        yield
        return
    import keras
    import tensorflow as tf

    def refused(what: str) -> Any:
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            raise _FitDuringImport(user_place(sys._getframe(1), [file.parent]), what)

        return call

    try:
        with contextlib.ExitStack() as stack:
            for owner, name in (
                (keras.Model, "fit"),
                (keras.Model, "train_on_batch"),
                (keras.optimizers.Optimizer, "apply_gradients"),
                (keras.optimizers.Optimizer, "apply"),
                (tf.GradientTape, "gradient"),
            ):
                stack.enter_context(patched(owner, name, refused(name)))
            yield
    except _FitDuringImport as stopped:
        contract = defines_contract(tree)
        raise PipelineFileError(_message(shown, stopped.where, stopped.what, contract)) from None


def _imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
        return [node.module]
    if isinstance(node, ast.ImportFrom) and node.level:
        return [node.module or alias.name for alias in node.names]
    return []


def _message(shown: str, where: str, what: str = "fit", contract: bool = True) -> str:
    stopped = (
        f"{shown} started training (`{what}` at {where}) while tfperf imported it, so tfperf "
        "stopped it before any step ran. "
    )
    if not contract:
        return stopped + (
            "Its syntax showed no training of its own (no `fit`, `train_on_batch`, "
            "`apply_gradients` or tape `gradient` call), so tfperf imported it as a pipeline "
            "file, and everything at its top level runs on import. Move the code that trains under "
            '`if __name__ == "__main__":`, and tfperf runs the file as a training script (see '
            'docs/zero-change.md, "Two kinds of file").'
        )
    return stopped + (
        "The file defines `make_dataset` and `make_model` "
        "(or `make_train_step`), so tfperf imports it as a pipeline file, and everything at "
        "its top level runs on import. Move the code that trains under "
        '`if __name__ == "__main__":`, or, to tune it as a training script, remove those '
        'functions\' contract names (see docs/zero-change.md, "Two kinds of file").'
    )
