"""The registered frameworks, imported lazily by module name.

The registry names each implementation by its module, so importing `tfperf.frameworks` imports
no framework (and no implementation) until one is asked for.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from tfperf.errors import PipelineFileError
from tfperf.frameworks._base import Framework

#: Each framework's name and the module that defines `FRAMEWORK`, in detection order.
#: PyTorch comes first: it claims only a file that imports torch and defines `make_loader` or
#: builds a `DataLoader`, which a tf.data file does not.
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
    """The first framework that claims the file at `path`, else the default one.

    Raises:
        PipelineFileError: the file cannot be read.
    """
    try:
        source = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as error:
        raise PipelineFileError(f"cannot read {path}: {error.strerror}") from None
    return detect_source(source)


def detect_source(source: str) -> Framework:
    """The first framework that claims a file with this source text, else the default one."""
    for name in IMPLEMENTATIONS:
        framework = get(name)
        if framework.claims(source):
            return framework
    return get(DEFAULT)
