"""pyproject.toml declares every package tfperf imports, so `pip install tfperf` is enough."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def imported_modules() -> dict[str, set[str]]:
    """Top-level modules outside the standard library that tfperf imports, with the files."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "tfperf").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif (dynamic := _imported_by_name(node)) is not None:
                names = [dynamic]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top != "tfperf" and top not in sys.stdlib_module_names:
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def _imported_by_name(node: ast.AST) -> str | None:
    """The module named in `importlib.import_module("pynvml")`; None for any other node."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "import_module"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return node.args[0].value
    return None


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared() -> set[str]:
    """The distributions in `[project] dependencies` (read as text: no tomllib on Python 3.10)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    block = re.search(r"^dependencies = \[\n(.*?)^\]", text, re.MULTILINE | re.DOTALL)
    assert block is not None, "pyproject.toml has no `dependencies = [` list"
    specs = re.findall(r'^\s*"([^"]+)",?\s*(?:#.*)?$', block.group(1), re.MULTILINE)
    return {_normalized(re.split(r"[<>=!~;\[ ]", spec, maxsplit=1)[0]) for spec in specs}


#: Folders whose imports an extra declares (`pip install tfperf[torch]`), by folder.
EXTRAS = {"tfperf/frameworks/torch/": "torch"}


def extra(name: str) -> set[str]:
    """The distributions of the optional extra `name` (`torch = ["torch>=2.1"]`)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    line = re.search(rf"^{name} = \[(.*?)\]", text, re.MULTILINE)
    assert line is not None, f"pyproject.toml has no `{name} = [` extra"
    specs = re.findall(r'"([^"]+)"', line.group(1))
    return {_normalized(re.split(r"[<>=!~;\[ ]", spec, maxsplit=1)[0]) for spec in specs}


def _allowed(files: set[str]) -> set[str]:
    """What may declare a module imported in `files`: the dependencies, or the extra of the
    folder that holds every one of them."""
    for folder, name in EXTRAS.items():
        if all(file.startswith(folder) for file in files):
            return declared() | extra(name)
    return declared()


def test_every_imported_package_is_a_declared_dependency():
    distributions = importlib.metadata.packages_distributions()
    missing = {}
    for module, files in imported_modules().items():
        names = {_normalized(name) for name in distributions.get(module, [module])}
        if not names & _allowed(files):
            missing[module] = sorted(files)
    assert missing == {}, "add these to [project] dependencies (or the folder's extra)"


def test_torch_is_an_extra_that_only_its_framework_imports():
    assert "torch" in extra("torch") and "torch" not in declared()
    assert all(f.startswith("tfperf/frameworks/torch/") for f in imported_modules()["torch"])


def test_the_scan_sees_imports_of_every_kind():
    # Guards the test above against a scan that finds nothing: these are known imports.
    modules = imported_modules()
    assert "tfperf/study/_storage.py" in modules["sqlalchemy"]  # from sqlalchemy... import
    assert "pynvml" in modules  # importlib.import_module("pynvml") in tfperf/probes/nvml.py
    assert "pathlib" not in modules and "tfperf" not in modules
    assert {"tensorflow", "sqlalchemy", "nvidia-ml-py"} <= declared()
