"""The seams that keep tfperf small: module size, the framework's name, knobs by declaration.

Each check reads the source as text (AST), so it holds for every module without running one,
and each has a companion test showing it can fail.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tfperf.knobs import KNOBS

PACKAGE = Path(__file__).resolve().parents[1] / "tfperf"
KNOB_NAMES = frozenset(knob.name for knob in KNOBS)

#: Lines a module of tfperf may hold: past it, a module holds more than one concept.
MAX_LINES = 600
#: Framework names the neutral core never compares with: the framework says what differs.
FRAMEWORK_NAMES = frozenset({"tensorflow", "torch"})
#: Units where a fact about a knob comes from its declaration, never from its name.
KNOB_READERS = ("tuner", "report", "results", "study", "cli")
#: The knob-name literals those units keep, and why each is not a knob reference.
KNOB_NAME_LITERALS = {
    ("results/_profile.py", "pin_memory"): "read from a saved result's free-form knobs mapping",
    ("results/_stages.py", "prefetch"): "StageKind.PREFETCH's JSON value",
    ("results/_memory.py", "prefetch"): "BufferKind.PREFETCH's JSON value",
    ("cli/_devices.py", "gpu_memory_growth"): "the --gpu-memory-growth flag's argparse name",
}


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _framework_names(tree: ast.AST) -> list[int]:
    """Lines that compare with a framework's name, or take one as a default."""
    found = []
    for node in ast.walk(tree):
        values: list[ast.expr] = []
        if isinstance(node, ast.Compare):
            values = [node.left, *node.comparators]
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            values = [node.value]
        elif isinstance(node, ast.arguments):
            values = [*node.defaults, *(d for d in node.kw_defaults if d is not None)]
        found += [
            value.lineno
            for value in values
            if isinstance(value, ast.Constant) and value.value in FRAMEWORK_NAMES
        ]
    return found


def _knob_names(tree: ast.AST) -> set[str]:
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value in KNOB_NAMES
    }


def test_no_module_is_over_the_line_limit() -> None:
    sizes = {path: len(path.read_text(encoding="utf-8").splitlines()) for path in _modules()}
    assert {str(path.relative_to(PACKAGE)): n for path, n in sizes.items() if n > MAX_LINES} == {}


def test_no_framework_name_is_compared_outside_frameworks() -> None:
    core = [path for path in _modules() if "frameworks" not in path.relative_to(PACKAGE).parts]
    found = {
        f"{path.relative_to(PACKAGE)}:{line}"
        for path in core
        for line in _framework_names(ast.parse(path.read_text(encoding="utf-8")))
    }
    assert found == set()


def test_a_framework_name_comparison_is_caught() -> None:
    source = 'def f(kind, name="torch"):\n    return kind == "tensorflow"\nx: str = "torch"\n'
    assert sorted(_framework_names(ast.parse(source))) == [1, 2, 3]


def test_facts_about_knobs_come_from_their_declarations() -> None:
    kept = {
        (str(path.relative_to(PACKAGE)), name)
        for unit in KNOB_READERS
        for path in sorted((PACKAGE / unit).rglob("*.py"))
        for name in _knob_names(ast.parse(path.read_text(encoding="utf-8")))
    }
    assert kept == set(KNOB_NAME_LITERALS)


def test_a_knob_named_by_its_literal_is_caught() -> None:
    assert _knob_names(ast.parse('if name == "num_parallel_calls": pass')) == {"num_parallel_calls"}
