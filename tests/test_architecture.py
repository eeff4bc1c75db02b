"""The plan of the house: every import in tfperf runs one way, and through a package's face.

Each unit of tfperf (a subpackage, or a top-level module) has a layer. A module may import
from its own unit and from units on lower layers, never from its own layer's other units or
from above; so the report layer never reaches the tuner, and the core types never reach the
zero-change machinery. Outside a subpackage, only its face (`tfperf.<package>`) is imported,
never its private `_modules`. Imports inside functions and under `TYPE_CHECKING` count too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "tfperf"

#: Lower layers first. A unit imports only from layers below its own.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "units", "tracebacks"),
    ("outputs", "kept"),  # write or keep files; import errors
    ("knobs",),
    ("results",),
    ("findings",),  # what a profile says: rules and checks over results, neutral
    ("offload",),  # tf.data service sizing: records and rules, neutral
    ("frameworks",),  # the framework interface and registry: neutral
    ("probes",),
    ("hardware",),
    ("sites",),
    ("pipeline",),
    ("measure",),
    # The implementations of `tfperf.frameworks`: TensorFlow, PyTorch's DataLoader.
    ("frameworks.tensorflow", "frameworks.torch"),
    ("trials", "study"),
    ("tuner", "report"),
    ("cli",),
    ("tfperf",),  # the package's own face (`tfperf/__init__.py`) and `__main__`
)
RANK = {unit: rank for rank, units in enumerate(LAYERS) for unit in units}
#: Subpackages whose insides are private: outsiders import their face only.
FACED = {"knobs", "results", "probes", "sites", "pipeline", "measure", "trials", "study"}
FACED |= {
    "tuner",
    "report",
    "frameworks",
    "frameworks.tensorflow",
    "frameworks.torch",
    "offload",
    "findings",
}
#: Public modules of a faced package that are faces of their own, one concept each (as
#: `optuna.visualization.matplotlib` is): outsiders may import `tfperf.<package>.<sub-face>`.
SUB_FACES: dict[str, frozenset[str]] = {
    "results": frozenset({"stages", "scaling", "discovery", "tune", "findings"}),
    "study": frozenset({"storage", "cluster", "ledger", "records"}),
    "knobs": frozenset({"declare", "choices"}),
    "measure": frozenset({"scaling", "emulated", "training", "served"}),
}
#: The most names one face exports: past it, the face holds more than one concept.
FACE_LIMIT = 30
#: Framework implementations: each subpackage of `tfperf/frameworks/` is a unit of its own.
IMPLEMENTATIONS = frozenset(
    path.parent.name for path in (PACKAGE / "frameworks").glob("*/__init__.py")
)


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _unit(parts: tuple[str, ...]) -> str:
    """`("tfperf", "measure", "_runner")` -> "measure"; the package's own files -> "tfperf";
    `("tfperf", "frameworks", "tensorflow", "_build")` -> "frameworks.tensorflow"."""
    if len(parts) < 2 or parts[1] in ("__init__", "__main__"):
        return "tfperf"
    if parts[1] == "frameworks" and len(parts) > 2 and parts[2] in IMPLEMENTATIONS:
        return f"frameworks.{parts[2]}"
    return parts[1]


def _dotted(path: Path) -> tuple[str, ...]:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    return tuple(relative.parts)


def _imports(path: Path) -> list[tuple[int, tuple[str, ...]]]:
    """Every tfperf module path `path` imports, with its line (`from x import y` gives x.y)."""
    found: list[tuple[int, tuple[str, ...]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, tuple(a.name.split("."))) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            base = tuple(node.module.split("."))
            found += [(node.lineno, (*base, alias.name)) for alias in node.names]
    return [(line, parts) for line, parts in found if parts[0] == "tfperf"]


def _through_face(target: tuple[str, ...], unit: str) -> bool:
    """`tfperf.measure.profile` is; `tfperf.measure._profiler.x`, `tfperf.probes.host.x` are not."""
    face = 1 + len(unit.split("."))  # `tfperf.<unit>`'s length
    names = target[face:]
    if names and names[0] in SUB_FACES.get(unit, frozenset()):
        names = names[1:]  # `tfperf.results.tune.TuneResult` is through the sub-face `tune`
    return names == () or (len(names) == 1 and not names[0].startswith("_"))


def _problems(path: Path) -> list[str]:
    here = _dotted(path)
    unit = _unit(here)
    problems = []
    for line, target in _imports(path):
        other = _unit(target)
        if other == unit or other not in RANK:
            continue
        where = f"{'/'.join(here)}.py:{line} imports {'.'.join(target)}"
        if RANK[other] >= RANK[unit]:
            problems.append(f"{where}: {unit} may not depend on {other} (see LAYERS)")
        elif other in FACED and not _through_face(target, other):
            problems.append(f"{where}: import it from the face `tfperf.{other}`")
    return problems


def test_every_unit_has_a_layer() -> None:
    units = {_unit(_dotted(path)) for path in _modules()}
    assert units <= set(RANK), f"add these to LAYERS: {sorted(units - set(RANK))}"


def test_imports_run_one_way_through_faces() -> None:
    problems = [problem for path in _modules() for problem in _problems(path)]
    assert problems == []


def _face_files() -> list[Path]:
    packages = [PACKAGE.joinpath(*package.split("."), "__init__.py") for package in FACED]
    subs = [PACKAGE / unit / f"{sub}.py" for unit, names in SUB_FACES.items() for sub in names]
    return sorted(packages + subs)


def _exported(face: Path) -> tuple[list[str], set[str]]:
    """What a face lists in `__all__`, and the names it imports."""
    tree = ast.parse(face.read_text(encoding="utf-8"))
    exported = next(
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
    )
    names = [ast.literal_eval(element) for element in exported.elts]  # type: ignore[attr-defined]
    imported = {
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    return names, imported


@pytest.mark.parametrize("face", _face_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_faces_declare_what_they_export(face: Path) -> None:
    names, imported = _exported(face)
    assert set(names) <= imported


@pytest.mark.parametrize("face", _face_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_face_holds_more_than_one_concept(face: Path) -> None:
    names, _ = _exported(face)
    assert len(names) <= FACE_LIMIT, (
        f"{face.relative_to(PACKAGE)} exports {len(names)} names: give a further concept a "
        "sub-face of its own (SUB_FACES)"
    )


def test_a_sub_face_counts_as_the_face_and_a_private_module_does_not() -> None:
    assert _through_face(("tfperf", "results", "tune", "TuneResult"), "results")
    assert not _through_face(("tfperf", "results", "_tune", "TuneResult"), "results")
    assert not _through_face(("tfperf", "probes", "host", "HostProbe"), "probes")


def test_a_wrong_way_import_is_caught(tmp_path: Path) -> None:
    """The check itself can fail: a core module importing the tuner is reported."""
    bad = PACKAGE / "knobs" / "_wrong_way_probe.py"
    bad.write_text("from tfperf.tuner import Tuner\nfrom tfperf.measure._profiler import x\n")
    try:
        problems = _problems(bad)
    finally:
        bad.unlink()
    assert len(problems) == 2
    assert "knobs may not depend on tuner" in problems[0]
    assert "knobs may not depend on measure" in problems[1]


def test_tensorflow_internals_are_private_to_their_package() -> None:
    """`_tf` is a private module of the TensorFlow package: no other unit may import it."""
    bad = PACKAGE / "cli" / "_tf_probe.py"
    bad.write_text(
        "from tfperf.frameworks.tensorflow._tf import METHODS\n"
        "from tfperf.frameworks.tensorflow import _tf\n"
    )
    try:
        problems = _problems(bad)
    finally:
        bad.unlink()
    assert len(problems) == 2
    assert all("import it from the face `tfperf.frameworks.tensorflow`" in p for p in problems)


#: The units that import no framework: no TensorFlow, no Keras and no framework implementation
#: (TensorFlow's internals, `_tf`, live inside `tfperf.frameworks.tensorflow`), at module level,
#: inside functions or under `TYPE_CHECKING`. They reach a framework only through a
#: `tfperf.frameworks.Framework` object. Every unit but the implementations is neutral.
NEUTRAL = ("errors", "units", "tracebacks", "outputs", "kept", "knobs", "results", "frameworks")
NEUTRAL += ("probes", "hardware", "sites", "pipeline", "measure", "trials", "study", "tuner")
NEUTRAL += ("report", "cli", "offload")
#: Top-level modules that are a framework.
FRAMEWORK_MODULES = frozenset({"tensorflow", "keras", "torch"})


def _is_framework(dotted: str) -> bool:
    parts = tuple(dotted.split("."))
    return parts[0] in FRAMEWORK_MODULES or (
        parts[:2] == ("tfperf", "frameworks") and len(parts) > 2 and parts[2] in IMPLEMENTATIONS
    )


def _framework_imports(path: Path) -> list[str]:
    """Each import in `path` of TensorFlow, Keras or a framework implementation."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        used: list[str] = []
        if isinstance(node, ast.Import):
            used = [alias.name for alias in node.names if _is_framework(alias.name)]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            dotted = [f"{node.module}.{alias.name}" for alias in node.names]
            whole = _is_framework(node.module)
            used = [node.module] if whole else [name for name in dotted if _is_framework(name)]
        found += [f"{path.relative_to(PACKAGE.parent)}:{node.lineno} imports {u}" for u in used]  # type: ignore[attr-defined]
    return found


def test_every_neutral_unit_exists() -> None:
    assert set(NEUTRAL) <= set(RANK)


def test_neutral_units_import_no_framework() -> None:
    """The measurement core holds a `Framework`; it never imports TensorFlow or its `_tf`."""
    neutral = [path for path in _modules() if _unit(_dotted(path)) in NEUTRAL]
    assert [use for path in neutral for use in _framework_imports(path)] == []


def test_a_framework_import_in_a_neutral_unit_is_caught() -> None:
    """The check itself can fail: every spelling of a framework import is reported."""
    bad = PACKAGE / "tuner" / "_framework_probe.py"
    bad.write_text(
        "import tensorflow as tf\n"
        "from keras import layers\n"
        "from tfperf.frameworks.tensorflow._tf import METHODS\n"
        "from tfperf.frameworks.tensorflow import _tf\n"
        "from tfperf.frameworks import tensorflow\n"
        "from tfperf.frameworks import Framework\n"
        "def later():\n"
        "    import tensorflow.data\n"
    )
    try:
        found = _framework_imports(bad)
    finally:
        bad.unlink()
    assert [use.split(" imports ")[1] for use in found] == [
        "tensorflow",
        "keras",
        "tfperf.frameworks.tensorflow._tf",
        "tfperf.frameworks.tensorflow",
        "tfperf.frameworks.tensorflow",
        "tensorflow.data",
    ]


#: TensorFlow's and Keras's private modules: only `tfperf/frameworks/tensorflow/_tf/` imports
#: them.
PRIVATE_MODULES = ("tensorflow.python", "keras.src")


def _private_tf_names() -> frozenset[str]:
    """The private tf.data classes and attributes `_tf` reads (and pins)."""
    from tfperf.frameworks.tensorflow import _tf

    classes = {cls for method in _tf.METHODS for cls in method.classes} | _tf.NOT_STAGES
    attributes = {*_tf.FUNCTION_ATTRIBUTES, *_tf.PARAMETER_ATTRIBUTES, "_inputs", "_generator"}
    return frozenset(classes | attributes)


def _private_module(name: str) -> bool:
    return any(name == module or name.startswith(f"{module}.") for module in PRIVATE_MODULES)


def _tf_internals_used(path: Path, names: frozenset[str]) -> list[str]:
    """Each use in `path` of a private TensorFlow module, attribute or class name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        used: list[str] = []
        if isinstance(node, ast.Import):
            used = [alias.name for alias in node.names if _private_module(alias.name)]
        elif isinstance(node, ast.ImportFrom) and node.module:
            dotted = [f"{node.module}.{alias.name}" for alias in node.names]
            used = [name for name in dotted if _private_module(name)]
        elif isinstance(node, ast.Attribute) and node.attr in names:
            used = [f".{node.attr}"]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            value = node.value
            used = [repr(value)] if value in names or _private_module(value) else []
        found += [f"{path.relative_to(PACKAGE.parent)}:{node.lineno} uses {u}" for u in used]  # type: ignore[attr-defined]
    return found


def test_tensorflow_internals_stay_in_tf() -> None:
    """Only `tfperf/frameworks/tensorflow/_tf/` touches TensorFlow's private modules, classes
    and attributes."""
    names = _private_tf_names()
    outside = [path for path in _modules() if "_tf" not in _dotted(path)]
    assert [use for path in outside for use in _tf_internals_used(path, names)] == []


def test_a_tensorflow_internal_outside_tf_is_caught() -> None:
    """The check itself can fail: each kind of private use outside `_tf` is reported."""
    bad = PACKAGE / "measure" / "_internals_probe.py"
    bad.write_text(
        "from tensorflow.python.data.ops import dataset_ops\n"
        "import keras.src.trainers\n"
        "inputs = dataset._inputs()\n"
        "batching = name == '_BatchDataset'\n"
    )
    try:
        found = _tf_internals_used(bad, _private_tf_names())
    finally:
        bad.unlink()
    assert [use.split(" uses ")[1] for use in found] == [
        "tensorflow.python.data.ops.dataset_ops",
        "keras.src.trainers",
        "._inputs",
        "'_BatchDataset'",
    ]


#: Optuna's private attributes tfperf relies on, and its storage internals' module.
OPTUNA_PRIVATE_ATTRIBUTES = frozenset({"_storage", "_trial_id", "_study_id"})


def _optuna_internals_used(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        used = ""
        if isinstance(node, ast.Attribute) and node.attr in OPTUNA_PRIVATE_ATTRIBUTES:
            used = f".{node.attr}"
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("optuna.storages"):
            used = str(node.module)
        if used:
            found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} uses {used}")
    return found


def test_optuna_internals_stay_in_study() -> None:
    """Only `tfperf/study/` touches Optuna's storage and private trial attributes."""
    outside = [path for path in _modules() if _unit(_dotted(path)) != "study"]
    assert [use for path in outside for use in _optuna_internals_used(path)] == []


def test_an_optuna_internal_outside_study_is_caught() -> None:
    bad = PACKAGE / "tuner" / "_optuna_probe.py"
    bad.write_text(
        "from optuna.storages import RDBStorage\n"
        "study._storage.set_trial_state_values(trial._trial_id, state)\n"
    )
    try:
        found = _optuna_internals_used(bad)
    finally:
        bad.unlink()
    assert sorted(use.split(" uses ")[1] for use in found) == [
        "._storage",
        "._trial_id",
        "optuna.storages",
    ]
