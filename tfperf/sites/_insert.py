"""Inserts the code tfperf applied itself while measuring: options, precision, a prefetch, and
the `distribute()` call that read the input through tf.data service (`--service`).

A plain file or script reads no knobs, so what tfperf set around its calls during a trial
(`tf.data.Options`, the Keras precision policy, a `prefetch` it added at the end of the
pipeline) must be written into the user's file for the patch to reproduce the measurement.
Each goes where the dataset is handed over (`Discovery.end`):

- a script's `fit(x, ...)` call, the loop that iterates its dataset (`for b in X:`,
  `enumerate(X)`, `iter(X)`), or each `return X` of a plain file's `make_dataset()`: the
  options are built in the lines before that statement and `X` becomes
  `X.prefetch(tf.data.AUTOTUNE).with_options(options)`;
- the precision policy before the model exists: a script sets it after its imports; a plain
  file at the start of `make_model` / `make_train_step` (tfperf sets its own policy around
  those, so a policy set when the file is imported would not hold);
- process-wide statements a framework gives (`Additions.statements`, a PyTorch script's
  `torch.set_num_threads(4)`): after the imports at the top of the anchor's file.

`placement_problem` says, before a study, why an addition cannot be placed in a file, so that
the study fixes that knob at what the code does rather than measure what no patch can hold.

No TensorFlow here.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterable, Iterator, Sequence

from tfperf.knobs import AUTOTUNE

_PRIMARY = (ast.Name, ast.Attribute, ast.Call, ast.Subscript)
#: The module a user's tf.data code imports, as its import statements name it.
TENSORFLOW = "tensorflow"


@dataclasses.dataclass(frozen=True)
class Anchor:
    """Where the dataset is handed over: a script's `fit` call or the loop that iterates it,
    or `def make_dataset` of a plain file (`script` False), by file (relative to the
    pipeline's folder) and line."""

    file: str
    line: int
    script: bool

    @classmethod
    def parse(cls, text: str, script: bool) -> Anchor:
        file, _, line = text.rpartition(":")
        return cls(file, int(line), script)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclasses.dataclass(frozen=True)
class Additions:
    """What to insert: option attribute -> value (Python source), a policy, a prefetch."""

    options: tuple[tuple[str, str], ...] = ()
    precision: str | None = None
    prefetch: int | None = None
    #: The arguments of the `distribute()` call that reads the dataset through tf.data
    #: service (Python source: `processing_mode="parallel_epochs", service="grpc://..."`).
    service: str | None = None
    # Process-wide settings a script makes once, after its top imports, in the file of the
    # anchor (`torch.set_num_threads(4)`): Python source, one statement each.
    statements: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return (
            bool(self.options)
            or self.precision is not None
            or self.prefetch is not None
            or self.service is not None
            or bool(self.statements)
        )

    def describe(self) -> list[str]:
        lines = [f"options.{path} = {value}" for path, value in self.options]
        if self.service is not None:
            lines.append(f"distribute({self.service}) added at the end of the pipeline")
        lines += list(self.statements)
        if self.prefetch is not None:
            shown = "AUTOTUNE" if self.prefetch == AUTOTUNE else str(self.prefetch)
            lines.append(f"prefetch({shown}) added at the end of the pipeline")
        if self.precision is not None:
            lines.append(f'keras.mixed_precision.set_global_policy("{self.precision}")')
        return lines


NOTHING_ADDED = Additions()


@dataclasses.dataclass(frozen=True)
class InsertEdit:
    """Text to put at a (line, col) of the file (col a UTF-8 byte offset, as in `ast`)."""

    line: int
    col: int
    text: str


def placement_problem(source: str, anchor: Anchor, what: str) -> str | None:
    """Why `what` ("options", "prefetch", "service", "precision" or "statements") cannot be
    written, else None."""
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        return f"{anchor.file} does not parse ({error.msg})"
    names = _Names(tree)
    if what == "statements":
        if _import_point(tree) is None:
            return f"{anchor.file} has no imports at its top to add a statement after"
        return None
    if what == "precision":
        if anchor.script and _fit_handover(tree, anchor) is None:
            return (
                f"the script trains in its own loop at {anchor}, which computes its own loss "
                "and gradients: a precision policy may need loss scaling there, so tfperf "
                "leaves the precision as written"
            )
        return None if _policy_point(tree, anchor) is not None else _no_policy_point(anchor)
    if names.tf is None and _import_point(tree) is None:
        return (
            f"{anchor.file} has no `import tensorflow` to build tf.data.Options with, and no "
            "imports at its top to add one after"
        )
    found = _handovers(tree, anchor)
    return found if isinstance(found, str) else None


def insert_edits(source: str, anchor: Anchor, additions: Additions) -> list[InsertEdit] | str:
    """The insertions for `additions` in `source`, or why they cannot be made safely."""
    for what, wanted in (
        ("options", additions.options),
        ("prefetch", additions.prefetch is not None),
        ("service", additions.service),
        ("precision", additions.precision),
        ("statements", additions.statements),
    ):
        problem = placement_problem(source, anchor, what) if wanted else None
        if problem:
            return problem
    tree = ast.parse(source)
    names = _Names(tree)
    lines = source.split("\n")
    edits: list[InsertEdit] = []
    if additions.options or additions.prefetch is not None or additions.service is not None:
        found = _handovers(tree, anchor)
        assert not isinstance(found, str)
        variable = names.free("options", "data_options", "tfperf_options")
        tf = names.tf or _import_tensorflow(tree, names, lines, edits)
        for statement, value in found:
            edits += _dataset_edits(statement, value, lines, tf, variable, additions)
    if additions.precision is not None:
        point = _policy_point(tree, anchor)
        assert point is not None
        line, indent, after, prefix = point
        call = f'{prefix}.set_global_policy("{additions.precision}")'
        text = f"\n{indent}{call}" if after else f"{indent}{call}\n"
        end = len(lines[line - 1].rstrip("\r").encode())
        edits.append(InsertEdit(line, end if after else 0, text))
    if additions.statements:
        top = _import_point(tree)
        assert top is not None  # placement_problem checked it
        end = len(lines[top - 1].rstrip("\r").encode())
        edits.append(InsertEdit(top, end, "".join(f"\n{s}" for s in additions.statements)))
    return edits


def _import_point(tree: ast.Module) -> int | None:
    """The line after which an import can go: the last of the imports at the top of the file
    (after its docstring), or None when it starts with something else."""
    body = tree.body[1:] if tree.body and _is_docstring(tree.body[0]) else tree.body
    last = None
    for node in body:
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            break
        last = node.end_lineno or node.lineno
    return last


def _import_tensorflow(
    tree: ast.Module, names: _Names, lines: list[str], edits: list[InsertEdit]
) -> str:
    """Adds `import tensorflow as tf` after the file's top imports (the dataset is built in a
    module of its own that imports it, say); returns the name it is bound to."""
    line = _import_point(tree)
    assert line is not None  # placement_problem checked it
    name = names.free("tf", TENSORFLOW)
    text = f"import {TENSORFLOW}" + ("" if name == TENSORFLOW else f" as {name}")
    edits.append(InsertEdit(line, len(lines[line - 1].rstrip("\r").encode()), f"\n{text}"))
    return name


def _dataset_edits(
    statement: ast.stmt,
    value: ast.expr,
    lines: list[str],
    tf: str,
    variable: str,
    additions: Additions,
) -> list[InsertEdit]:
    indent = lines[statement.lineno - 1][: statement.col_offset]
    edits = []
    suffix = ""
    if additions.service is not None:
        # As tfperf measured it: the workers run the pipeline, the trainer prefetches.
        suffix += f".apply({tf}.data.experimental.service.distribute({additions.service}))"
    if additions.prefetch is not None or additions.service is not None:
        prefetch = AUTOTUNE if additions.prefetch is None else additions.prefetch
        buffer = f"{tf}.data.AUTOTUNE" if prefetch == AUTOTUNE else prefetch
        suffix += f".prefetch({buffer})"
    if additions.options:
        setup = [f"{variable} = {tf}.data.Options()"]
        setup += [f"{variable}.{path} = {text}" for path, text in additions.options]
        edits.append(InsertEdit(statement.lineno, 0, "".join(f"{indent}{s}\n" for s in setup)))
        suffix += f".with_options({variable})"
    end = (value.end_lineno or 0, value.end_col_offset or 0)
    if not isinstance(value, _PRIMARY):
        edits.append(InsertEdit(value.lineno, value.col_offset, "("))
        suffix = ")" + suffix
    edits.append(InsertEdit(*end, suffix))
    return edits


def _handovers(tree: ast.Module, anchor: Anchor) -> list[tuple[ast.stmt, ast.expr]] | str:
    """Each statement that hands the dataset over, with the expression that is the dataset."""
    if anchor.script:
        found = _fit_handover(tree, anchor)
        if found is None:
            found = _loop_handover(tree, anchor)
        if isinstance(found, str):
            return found
        pairs = [found]
    else:
        function = _function_at(tree, "make_dataset", anchor.line)
        if function is None:
            return f"{anchor.file} has no `def make_dataset()` at line {anchor.line} any more"
        returns = [node for node in _own_nodes(function) if isinstance(node, ast.Return)]
        if not returns or any(node.value is None for node in returns):
            return f"`make_dataset()` in {anchor.file} has a `return` without a dataset"
        pairs = [(node, node.value) for node in returns if node.value is not None]
    for statement, _ in pairs:
        if statement is None or not _starts_its_line(statement, tree):
            return f"the statement that hands the dataset over at {anchor} shares its line"
    return [(statement, value) for statement, value in pairs if statement is not None]


_Handover = tuple[ast.stmt | None, ast.expr]


def _fit_handover(tree: ast.Module, anchor: Anchor) -> _Handover | str | None:
    """A script's `fit(x, ...)` call at the anchor and its `x`; None where there is none."""
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "fit"
        and node.lineno <= anchor.line <= (node.func.end_lineno or node.lineno)
    ]
    if not calls:
        return None
    if len(calls) != 1:
        return f"{anchor} does not hold one `.fit(...)` call tfperf can find again"
    value = _fit_input(calls[0])
    if value is None:
        return f"the `fit` call at {anchor} passes no x tfperf can wrap"
    return _statement_of(tree, calls[0]), value


def _loop_handover(tree: ast.Module, anchor: Anchor) -> _Handover | str:
    """A script's own loop at the anchor (`for batch in DATASET:`, `enumerate(DATASET)`, or
    `iter(DATASET)`) and the expression that is its dataset."""
    loops = [
        node for node in ast.walk(tree) if isinstance(node, ast.For) and node.lineno == anchor.line
    ]
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and _called_name(node) == "iter"
        and node.lineno == anchor.line
        and len(node.args) == 1
    ]
    if len(loops) + len(calls) != 1:
        return f"{anchor} holds neither one `.fit(...)` call nor one loop over a dataset"
    statement: ast.stmt | None
    if loops:
        statement, value = loops[0], loops[0].iter
    else:
        statement, value = _statement_of(tree, calls[0]), calls[0].args[0]
    if isinstance(value, ast.Call) and _called_name(value) == "enumerate" and value.args:
        value = value.args[0]
    if not _is_dataset_expression(value):
        shown = ast.unparse(value)
        return (
            f"the loop at {anchor} iterates `{shown}`, which tfperf cannot tell is the dataset "
            "itself (a wrapper's call); name the dataset in the loop to let tfperf add to it"
        )
    return statement, value


#: tf.data's methods that return a dataset, as a loop may iterate their call.
DATASET_METHODS = frozenset(
    {"take", "skip", "repeat", "shuffle", "batch", "padded_batch", "prefetch", "map", "filter"}
    | {"cache", "with_options", "unbatch", "rebatch", "shard", "apply", "enumerate"}
)


def _is_dataset_expression(value: ast.expr) -> bool:
    """Whether `value` is a dataset by its shape: a name, an attribute, an item, or a
    dataset method's call on one of those."""
    while isinstance(value, ast.Call):
        if not (isinstance(value.func, ast.Attribute) and value.func.attr in DATASET_METHODS):
            return False
        value = value.func.value
    return isinstance(value, (ast.Name, ast.Attribute, ast.Subscript))


def _called_name(call: ast.Call) -> str | None:
    return call.func.id if isinstance(call.func, ast.Name) else None


def _fit_input(call: ast.Call) -> ast.expr | None:
    if call.args and not isinstance(call.args[0], ast.Starred):
        return call.args[0]
    return next((kw.value for kw in call.keywords if kw.arg == "x"), None)


def _statement_of(tree: ast.Module, target: ast.AST) -> ast.stmt | None:
    """The innermost statement holding `target`: a nested statement starts after its parent."""
    holding = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.stmt) and any(child is target for child in ast.walk(node))
    ]
    return max(holding, key=lambda node: (node.lineno, node.col_offset), default=None)


def _starts_its_line(statement: ast.stmt, tree: ast.Module) -> bool:
    """No other statement starts on the line before this one (`if x: fit(...)`, `a; b`)."""
    return not any(
        isinstance(node, ast.stmt)
        and node is not statement
        and (node.end_lineno or node.lineno) >= statement.lineno
        and node.lineno == statement.lineno
        and node.col_offset < statement.col_offset
        for node in ast.walk(tree)
    )


def _own_nodes(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.AST]:
    """The nodes of `function`'s body, not those of functions or classes defined inside it."""
    pending: list[ast.AST] = list(function.body)
    while pending:
        node = pending.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            pending.extend(ast.iter_child_nodes(node))


def _function_at(
    tree: ast.Module, name: str, line: int | None
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            lines = {node.lineno, *(d.lineno for d in node.decorator_list)}
            if line is None or line in lines:
                return node
    return None


def _policy_point(tree: ast.Module, anchor: Anchor) -> tuple[int, str, bool, str] | None:
    """(line, indent, after, prefix): insert after line `line` (a script's last import before
    any call), or before it (the first statement of a plain file's model function); `prefix`
    spells `mixed_precision` with the imports in force there."""
    if anchor.script:
        leading: list[ast.stmt] = []
        for node in tree.body:
            if node.lineno >= anchor.line or (
                not isinstance(node, (ast.Import, ast.ImportFrom))
                and any(isinstance(child, ast.Call) for child in ast.walk(node))
            ):
                break
            leading.append(node)
        imports = [node for node in leading if isinstance(node, (ast.Import, ast.ImportFrom))]
        prefix = _keras_prefix(imports)
        if not imports or prefix is None:
            return None
        return imports[-1].end_lineno or imports[-1].lineno, "", True, prefix
    prefix = _keras_prefix(tree.body)
    for name in ("make_model", "make_train_step"):
        function = _function_at(tree, name, None)
        if function is None or prefix is None:
            continue
        body = function.body
        if _is_docstring(body[0]):
            if len(body) == 1:
                return None
            body = body[1:]
        return body[0].lineno, " " * body[0].col_offset, False, prefix
    return None


def _keras_prefix(statements: Sequence[ast.stmt]) -> str | None:
    """How `set_global_policy` is reached under these imports: `keras.mixed_precision`, ..."""
    tf = None
    for node in statements:
        keras = imported([node], "keras") or imported([node], TENSORFLOW, "keras")
        if keras:
            return f"{keras}.mixed_precision"
        policy = imported([node], "keras", "mixed_precision")
        if policy:
            return policy
        tf = tf or imported([node], TENSORFLOW)
    return f"{tf}.keras.mixed_precision" if tf else None


def imported(statements: Iterable[ast.stmt], module: str, name: str | None = None) -> str | None:
    """The name the first of `statements` that imports it binds: `import module [as x]`, or
    with `name`, `from module import name [as x]`; None where none does."""
    for node in statements:
        if name is None and isinstance(node, ast.Import):
            bound = [alias.asname or module for alias in node.names if alias.name == module]
        elif name is not None and isinstance(node, ast.ImportFrom) and node.module == module:
            bound = [alias.asname or name for alias in node.names if alias.name == name]
        else:
            continue
        if bound:
            return bound[0]
    return None


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _no_policy_point(anchor: Anchor) -> str:
    if anchor.script:
        return (
            f"{anchor.file} imports neither keras nor tensorflow before its first call, where "
            "a policy set after the imports would hold for the model"
        )
    return (
        f"{anchor.file} defines no `make_model()` or `make_train_step()` (with a statement) to "
        "set a policy in, or imports neither keras nor tensorflow"
    )


class _Names:
    """How the file spells tensorflow, and the names it uses."""

    def __init__(self, tree: ast.Module) -> None:
        self.used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        self.tf = imported(tree.body, TENSORFLOW)

    def free(self, *choices: str) -> str:
        return next((name for name in choices if name not in self.used), choices[-1])
