"""The user's own modules a script imports, found from their syntax before anything runs.

Detection reads them (`_registry.detect`): a `train.py` that builds no loader itself may be
written for a framework only through `mypkg/data.py`.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path

#: Folders of installed packages: never the user's own modules.
_INSTALLED = ("site-packages", "dist-packages")
#: The most of the user's modules `imported_files` reads: enough for a project's own package,
#: few enough that a folder holding a whole source tree costs milliseconds.
_MOST_MODULES = 200


def imported_files(path: Path) -> list[Path]:
    """The user's own modules the file at `path` imports, directly or through each other.

    Found from their syntax alone (nothing runs): an `import` or `from ... import` whose module
    (or package) is a file under the file's folder, as `python path` would find it first on
    `sys.path`; relative imports from inside those packages too. Installed packages and files
    that cannot be read or parsed are left out; at most `_MOST_MODULES` files are read.

    Example:
        >>> imported_files(Path("no-such-script.py"))
        []
    """
    root = path.resolve().parent
    seen: set[Path] = {path.resolve()}
    pending = [path.resolve()]
    found: list[Path] = []
    while pending and len(found) < _MOST_MODULES:
        file = pending.pop(0)
        for module in _imports(file, root):
            if module not in seen and not any(part in _INSTALLED for part in module.parts):
                seen.add(module)
                found.append(module)
                pending.append(module)
    return found[:_MOST_MODULES]


def _imports(file: Path, root: Path) -> list[Path]:
    """The files under `root` that `file`'s import statements name, in order."""
    try:
        tree = ast.parse(file.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return []
    files: list[Path] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            dotted = [alias.name.split(".") for alias in node.names]
            files += [f for parts in dotted for f in _module_files(root, parts)]
        elif isinstance(node, ast.ImportFrom):
            base = _base_folder(file, root, node.level)
            if base is None:
                continue
            parts = node.module.split(".") if node.module else []
            files += _module_files(base, parts)
            # `from pkg import data` imports the submodule `pkg/data.py` where there is one.
            files += [f for a in node.names for f in _module_files(base, [*parts, a.name])[-1:]]
    return files


def _base_folder(file: Path, root: Path, level: int) -> Path | None:
    """Where an import of `level` dots starts: the root for an absolute import."""
    if level == 0:
        return root
    folder = file.parent
    for _ in range(level - 1):
        folder = folder.parent
    return folder if folder.is_relative_to(root) else None


def _module_files(base: Path, parts: Sequence[str]) -> list[Path]:
    """The files Python runs to import `parts` from `base`: each package's `__init__.py`
    on the way, then the module; stops where a part is no file or folder there."""
    files: list[Path] = []
    folder = base
    for part in parts:
        if part == "*":
            break
        package, module = folder / part, folder / f"{part}.py"
        if (package / "__init__.py").is_file():
            files.append((package / "__init__.py").resolve())
        elif module.is_file():  # a module: what follows is a name in it
            files.append(module.resolve())
            break
        elif not package.is_dir():  # a namespace package is a folder without `__init__.py`
            break
        folder = package
    return files
