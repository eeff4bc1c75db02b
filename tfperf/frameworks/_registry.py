"""The registered frameworks, imported lazily by module name.

The registry names each implementation by its module, so importing `tfperf.frameworks` imports
no framework (and no implementation) until one is asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from tfperf.errors import PipelineFileError
from tfperf.frameworks._base import Framework
from tfperf.frameworks._modules import imported_files

if TYPE_CHECKING:
    from tfperf.results import ProfileResult

#: Each framework's name and the module that defines `FRAMEWORK`, in detection order.
#: PyTorch comes first: it claims a file that imports torch and defines `make_loader` or builds
#: a `DataLoader` (which a tf.data file does not), or imports torch and no TensorFlow or Keras.
IMPLEMENTATIONS: dict[str, str] = {
    "torch": "tfperf.frameworks.torch",
    "tensorflow": "tfperf.frameworks.tensorflow",
}
#: The framework a file is taken for when no framework claims it.
DEFAULT = "tensorflow"


def names() -> list[str]:
    """The registered frameworks' names, in detection order."""
    return list(IMPLEMENTATIONS)


def get(name: str) -> Framework:
    """The framework registered as `name`.

    Raises:
        ValueError: no framework is registered under that name.
    """
    module = IMPLEMENTATIONS.get(name)
    if module is None:
        raise ValueError(f"no framework is named {name!r}; the frameworks are {names()}")
    framework = importlib.import_module(module).FRAMEWORK
    if not isinstance(framework, Framework):
        raise TypeError(f"{module}.FRAMEWORK must be a Framework, but got {framework!r}")
    return framework


def detect(path: str | Path) -> Framework:
    """The framework the file at `path` is written for.

    The first framework that claims the file itself; else, when exactly one framework claims
    the user's own modules it imports (`_modules.imported_files`: a `train.py` whose
    `DataLoader` is built in `mypkg/data.py`), that one; else the default one. Two frameworks
    among the modules leave the default: a TensorFlow project with a torch helper stays
    TensorFlow's.

    Raises:
        PipelineFileError: the file cannot be read.
    """
    source = _read(Path(path))
    claimed = _claimant(source)
    if claimed is not None:
        return claimed
    modules = [_read(module, missing="") for module in imported_files(Path(path))]
    among = [f for f in map(get, IMPLEMENTATIONS) if any(f.claims(m) for m in modules if m)]
    return among[0] if len(among) == 1 else get(DEFAULT)


def detect_result(results: Iterable[ProfileResult | None]) -> Framework:
    """The framework that measured stored profiles (`Framework.measured`), else the default."""
    found = [result for result in results if result is not None]
    claimed = (f for f in map(get, IMPLEMENTATIONS) if any(f.measured(r) for r in found))
    return next(claimed, get(DEFAULT))


def detect_source(source: str) -> Framework:
    """The first framework that claims a file with this source text, else the default one.

    The file's own text only: `detect(path)` also reads the modules it imports.
    """
    return _claimant(source) or get(DEFAULT)


def _claimant(source: str) -> Framework | None:
    for name in IMPLEMENTATIONS:
        framework = get(name)
        if framework.claims(source):
            return framework
    return None


def _read(path: Path, missing: str | None = None) -> str:
    """The file's text; `missing` where it cannot be read, else `PipelineFileError`."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as error:
        if missing is not None:
            return missing
        raise PipelineFileError(f"cannot read {path}: {error.strerror}") from None
