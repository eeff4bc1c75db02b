"""Counts the structure figures issue notes quote: module sizes, knob literals, TF reach, faces.

Run from the repository root: `python tools/structure_metrics.py [--tf-home PACKAGE ...]`.
It reads the sources with `ast` only, so it runs without TensorFlow.
"""

from __future__ import annotations

import argparse
import ast
import statistics
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tfperf"
FRAMEWORK_MODULES = ("tensorflow", "keras", "tf_keras")
#: TensorFlow's internals inside tfperf: the package before it moved, and where it lives now.
_TF_INTERNALS = ("tfperf._tf", "tfperf.frameworks.tensorflow._tf")


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _unit(path: Path) -> str:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else path.stem


def _imports_tensorflow(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            if name.split(".")[0] in FRAMEWORK_MODULES or name.startswith(_TF_INTERNALS):
                return True
    return False


def _knob_names() -> set[str]:
    tree = ast.parse((PACKAGE / "knobs" / "_knobs.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "Knobs":
            return {
                item.target.id
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            } - {"sites"}
    return set()


def _face_size(package: Path) -> int | None:
    face = package / "__init__.py"
    if not face.exists():
        return None
    for node in ast.parse(face.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return len(node.value.elts)  # type: ignore[attr-defined]
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tf-home", action="append", default=["frameworks"], help="TF's packages")
    args = parser.parse_args()
    paths = _modules()
    lines = sorted(len(p.read_text(encoding="utf-8").splitlines()) for p in paths)
    knobs = _knob_names()
    literals = 0
    tf_outside = []
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        unit = _unit(path)
        if unit != "knobs":
            literals += sum(
                isinstance(n, ast.Constant) and n.value in knobs for n in ast.walk(tree)
            )
        if unit not in args.tf_home and _imports_tensorflow(tree):
            tf_outside.append(str(path.relative_to(PACKAGE.parent)))
    print(f"modules: {len(paths)}")
    print(
        f"module lines: median {statistics.median(lines):.0f}, "
        f"p90 {lines[int(0.9 * (len(lines) - 1))]}"
    )
    print(f"knob-name literals outside knobs/: {literals}")
    print(f"modules importing TensorFlow/Keras/_tf outside {args.tf_home}: {len(tf_outside)}")
    for name in tf_outside:
        print(f"  {name}")
    faces = {p.name: _face_size(p) for p in sorted(PACKAGE.iterdir()) if p.is_dir()}
    print("face sizes: " + ", ".join(f"{k} {v}" for k, v in faces.items() if v is not None))


if __name__ == "__main__":
    main()
