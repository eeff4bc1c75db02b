"""The contract of a pipeline file: which functions and settings it must define, and how.

A pipeline file defines `make_dataset(knobs)` and `make_model(knobs)` or `make_train_step(knobs)`
(the train step wins when both exist), each callable with the knobs alone, and optionally
`BASELINE` (the knobs the user runs today) and `SEARCH_SPACE` (what `tfperf tune` may change).

A *plain* file's `make_dataset()` takes no argument: its values are written in its tf.data
calls, which tfperf finds and tunes as call sites (TensorFlow's recorder). Its `make_model` and
`make_train_step` may take the knobs or nothing; its `BASELINE` and `SEARCH_SPACE` may hold only
the knobs tfperf applies itself (precision, tf.data options), since nothing reads the others.

For training under `tf.distribute` (docs/multi-device.md), a file may also define
`make_strategy()` returning a `tf.distribute.Strategy`, and its `make_dataset` may take a
second argument, a `tf.distribute.InputContext` (`make_dataset(knobs, input_context)`): tfperf
then distributes it with `strategy.distribute_datasets_from_function`, and the dataset batches
per replica (`input_context.get_per_replica_batch_size(knobs.batch_size)`).

Every breach raises `PipelineFileError` naming the file, what was found and the fix.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import inspect
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, cast

from tfperf.errors import KnobError, PipelineFileError
from tfperf.knobs import (
    CODE_KNOBS,
    KNOBS,
    Domain,
    Fixed,
    Knobs,
    framework_knobs,
    parse_search_space,
)

if TYPE_CHECKING:
    from tfperf.frameworks import Framework


#: Names whose presence makes a file a pipeline file rather than a training script.
CONTRACT_NAMES = frozenset(
    {"make_dataset", "make_model", "make_train_step", "BASELINE", "SEARCH_SPACE"}
)

#: Calls that train: Keras's `fit`, and the steps of a script's own loop.
TRAINING_CALLS = frozenset({"fit", "train_on_batch", "apply_gradients", "gradient"})
#: Modules whose functions share a training call's name (`np.gradient`): not training.
_NOT_TRAINING = frozenset({"np", "numpy"})

#: Names of `make_dataset`'s second parameter that make it take a `tf.distribute.InputContext`.
_CONTEXT_NAMES = frozenset({"input_context", "context", "ctx"})

_PURPOSE = {
    "make_dataset": "to build the pipeline",
    "make_loader": "to build the DataLoader it measures",
    "make_model": "to build the model it trains on each batch",
    "make_train_step": "to build the step it runs on each batch",
}


@dataclasses.dataclass(frozen=True)
class Contract:
    """What a pipeline module provides, checked. One of the two training functions is set,
    unless the contract was checked for an emulated step (`needs_step` False).

    Every function is callable with the knobs: one the file defines without a parameter is
    wrapped to drop them, and its name is in `without_knobs`. `plain` is True when
    `make_dataset` takes no knobs.
    """

    make_dataset: Callable[[Knobs], Any]
    make_model: Callable[[Knobs], Any] | None
    make_train_step: Callable[[Knobs], Any] | None
    baseline: Knobs
    has_baseline: bool
    search_space: dict[str, Domain]
    without_knobs: frozenset[str] = frozenset()
    make_strategy: Callable[[], Any] | None = None

    @property
    def plain(self) -> bool:
        return "make_dataset" in self.without_knobs


def check_contract(
    module: types.ModuleType,
    shown: str,
    framework: Framework,
    *,
    needs_step: bool = True,
) -> Contract:
    """Checks what an executed pipeline module defines; `shown` names the file in messages.

    `framework` is the file's framework: the function that builds its input
    (`Framework.input_function`: `make_dataset`, or `make_loader` for a PyTorch DataLoader) is
    held as `make_dataset`, and `BASELINE` and `SEARCH_SPACE` may hold only the knobs that act
    in its pipelines. `needs_step` False accepts a file with the input function alone: its
    training step is emulated (`--step-time`), so no model is built.

    Raises:
        PipelineFileError: a required function is missing, not callable or cannot take the
            knobs, or `BASELINE` / `SEARCH_SPACE` is invalid or holds another framework's knob.
    """
    input_function = framework.input_function
    plain = _takes_nothing(getattr(module, input_function, None))
    without: set[str] = set()
    make_dataset = _function(module, input_function, shown, required=True, without=without)
    assert make_dataset is not None  # required=True raises instead of returning None
    others = without if plain else None
    make_model = _function(module, "make_model", shown, required=False, without=others)
    make_train_step = _function(module, "make_train_step", shown, required=False, without=others)
    if needs_step and make_model is None and make_train_step is None:
        raise PipelineFileError(_no_training_message(module, shown, framework))
    baseline, has_baseline = _baseline(module, shown)
    search_space = _search_space(module, shown)
    _check_settings_framework(module, search_space, shown, framework.name)
    make_strategy = strategy_function(module, shown)
    if plain:
        without = {"make_dataset" if name == input_function else name for name in without}
        _check_plain_settings(module, search_space, shown)
        search_space = {**fixed_code_knobs(), **search_space}
    return Contract(
        make_dataset=make_dataset,
        make_model=make_model,
        make_train_step=make_train_step,
        baseline=baseline,
        has_baseline=has_baseline,
        search_space=search_space,
        without_knobs=frozenset(without),
        make_strategy=make_strategy,
    )


def check_framework_knobs(names: Iterable[str], framework: str, *, shown: str, source: str) -> None:
    """Raises `KnobError` if one of `names` is a knob that acts in another framework only.

    A `prefetch` in a PyTorch file's `BASELINE`, or `num_workers` in a tf.data file's, would
    reach no code that applies it: silently dropped, the run would measure what the user did
    not ask for. Which framework a knob acts in comes from its declaration
    (`Knob.frameworks`). Call sites and unknown names are left to `check_names`.

    Args:
        names: knob names as the user gave them.
        framework: the pipeline's framework (`tfperf.frameworks` name).
        shown: the pipeline file, as messages name it.
        source: where the names came from ("BASELINE", "--set"), which begins the message.

    Raises:
        KnobError: naming the knobs, the file, and the knobs its framework takes.
    """
    from tfperf import frameworks

    takes = framework_knobs(framework)
    if not takes:  # a framework no declaration names yet: nothing to tell its knobs by
        return
    declared = set(KNOBS.names())
    foreign = [name for name in names if name in declared and name not in takes]
    if not foreign:
        return
    this = frameworks.get(framework).words
    owners = sorted({owner for name in foreign for owner in KNOBS[name].frameworks})
    theirs = " or ".join(frameworks.get(owner).words.label for owner in owners)
    plural = len(foreign) > 1
    them = "them" if plural else "it"
    raise KnobError(
        f"{source}: {', '.join(repr(name) for name in foreign)} "
        f"{'are knobs' if plural else 'is a knob'} of {theirs} pipelines only, but {shown} is "
        f"a {this.label} pipeline, where nothing would apply {them}. Remove {them}; the knobs "
        f"a {this.label} pipeline takes are: {', '.join(takes)}."
    )


def _check_settings_framework(
    module: types.ModuleType, search_space: Mapping[str, Domain], shown: str, framework: str
) -> None:
    """Refuses another framework's knob in `BASELINE` or `SEARCH_SPACE` (as written)."""
    raw = getattr(module, "BASELINE", None)
    if isinstance(raw, Knobs):
        raw = Knobs().diff(raw)
    for source, names in (("BASELINE", list(raw or ())), ("SEARCH_SPACE", list(search_space))):
        try:
            check_framework_knobs(names, framework, shown=shown, source=f"{shown}: {source}")
        except KnobError as error:
            raise PipelineFileError(str(error)) from None


def strategy_function(module: types.ModuleType | None, shown: str) -> Callable[[], Any] | None:
    """The file's `make_strategy`, checked callable with no argument; None when it has none.

    Raises:
        PipelineFileError: `make_strategy` is not a function, or needs arguments.
    """
    function = getattr(module, "make_strategy", None) if module is not None else None
    if function is None:
        return None
    if not callable(function):
        raise PipelineFileError(
            f"{shown}: `make_strategy` is a {type(function).__name__}, not a function; tfperf "
            "calls `make_strategy()` to get the tf.distribute.Strategy to train under. Define "
            "it with `def make_strategy():` returning e.g. `tf.distribute.MirroredStrategy()`."
        )
    if not _binds_signature(function):
        raise PipelineFileError(
            f"{shown}: `make_strategy` must take no argument (tfperf calls `make_strategy()`), "
            f"but its signature is `make_strategy{inspect.signature(function)}`. Give its "
            "parameters defaults, or read them from constants."
        )
    return cast("Callable[[], Any]", function)


def takes_input_context(function: Callable[..., Any] | None) -> bool:
    """Whether a file's `make_dataset` takes an input context after the knobs.

    True for `make_dataset(knobs, input_context)`: a second positional parameter named
    `input_context`, `context` or `ctx` (it may have a default). tfperf then builds the dataset
    once per input pipeline through `strategy.distribute_datasets_from_function`. Any other
    second parameter stays an error of the contract, which names it.
    """
    if function is None or isinstance(function, _DropKnobs):
        return False
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return False
    kind = inspect.Parameter
    positional = [
        p
        for p in signature.parameters.values()
        if p.kind in (kind.POSITIONAL_ONLY, kind.POSITIONAL_OR_KEYWORD)
    ]
    return (
        len(positional) >= 2
        and positional[1].name in _CONTEXT_NAMES
        and _binds(signature, None, None)
    )


def _binds_signature(function: Callable[..., Any]) -> bool:
    """True when the signature cannot be read (trust the callable), else whether it binds no
    arguments."""
    try:
        return _binds(inspect.signature(function))
    except (TypeError, ValueError):
        return True


def fixed_code_knobs() -> dict[str, Domain]:
    """The knobs only user code applies, fixed: a file whose code takes no knobs cannot use
    them, so a search over them would measure the same pipeline again and again."""
    defaults = Knobs()
    return {name: Fixed(getattr(defaults, name)) for name in CODE_KNOBS}


def function_place(function: Callable[..., Any]) -> tuple[str, int]:
    """The file and first line of a user's function (through tfperf's wrapper of it)."""
    code = inspect.unwrap(function).__code__
    return code.co_filename, code.co_firstlineno


def is_script(tree: ast.Module) -> bool:
    """Whether the file is a training script rather than a pipeline file, from its syntax.

    Decided before any of the file runs, since importing a script would run its training. A
    training call is `.fit(...)`, or a step of the script's own loop: `.train_on_batch(...)`,
    an optimizer's `.apply_gradients(...)`, a tape's `.gradient(...)` (`TRAINING_CALLS`).

    - a training call in the file's top-level code (not inside a function, a class or an
      `if __name__ == "__main__":` block) runs on import: the file is a script;
    - otherwise a file that defines `make_dataset` and `make_model` or `make_train_step` is
      a pipeline file (a `__main__` block beside them does not run on import, and its own
      train step may apply gradients);
    - otherwise a file with a training call anywhere is a script (`make_model()` and
      `get_dataset()` helpers of a script do not make it a pipeline file; a custom loop that
      calls its `train_step` at the top level is one), and so is a file with a `__main__`
      block that defines none of the contract's names.

    A file with part of the contract and no training call stays a (broken) pipeline file, so
    its message says which function is missing.
    """
    if trains_on_import(tree):
        return True
    if defines_contract(tree):
        return False
    if _top_level_names(tree.body) & CONTRACT_NAMES:
        return trains_anywhere(tree)
    return trains_anywhere(tree) or _has_main_guard(tree)


def trains_on_import(tree: ast.Module, calls: frozenset[str] = TRAINING_CALLS) -> bool:
    """Whether the file's top-level code (what importing it runs: not a function's or a
    class's body, nor a `__main__` block) makes one of `calls` (method names, `.fit(...)`)."""
    return any(_calls(node, calls) for node in _top_level_code(tree.body))


def trains_anywhere(tree: ast.Module, calls: frozenset[str] = TRAINING_CALLS) -> bool:
    """Whether the file makes one of `calls` anywhere, inside its functions too."""
    return any(_calls(node, calls) for node in ast.walk(tree))


def defines_contract(tree: ast.Module) -> bool:
    """Whether the file defines `make_dataset` and `make_model` or `make_train_step` at its top
    level: what makes a file a pipeline file, unless it trains on import."""
    names = _top_level_names(tree.body)
    return "make_dataset" in names and bool(names & {"make_model", "make_train_step"})


def _has_main_guard(tree: ast.Module) -> bool:
    return any(_is_main_guard(node) for node in ast.walk(tree))


def _top_level_code(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """The nodes that run when the module is imported: not function or class bodies, not a
    `__main__` block (lambdas stay out too: they run only when called)."""
    pending: list[ast.AST] = list(body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            pending.extend(getattr(node, "decorator_list", ()))
            continue
        if _is_main_guard(node):
            assert isinstance(node, ast.If)
            pending.extend(node.orelse)
            continue
        yield node
        pending.extend(ast.iter_child_nodes(node))


def _top_level_names(body: list[ast.stmt]) -> set[str]:
    names: set[str] = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            nested = [*node.body, *getattr(node, "orelse", ()), *getattr(node, "finalbody", ())]
            for handler in getattr(node, "handlers", ()):
                nested.extend(handler.body)
            names |= _top_level_names(nested)
    return names


def _calls(node: ast.AST, names: frozenset[str]) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in names
        and not (isinstance(node.func.value, ast.Name) and node.func.value.id in _NOT_TRAINING)
    )


def _is_main_guard(node: ast.AST) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    parts = [node.test.left, *node.test.comparators]
    return any(isinstance(p, ast.Name) and p.id == "__name__" for p in parts) and any(
        isinstance(p, ast.Constant) and p.value == "__main__" for p in parts
    )


def _takes_nothing(function: Any) -> bool:
    """Whether `function` is a plain `make_dataset()`: callable with no argument, not with one."""
    if not callable(function):
        return False
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return False
    return _binds(signature) and not _binds(signature, None)


def _binds(signature: inspect.Signature, *args: Any) -> bool:
    try:
        signature.bind(*args)
    except TypeError:
        return False
    return True


def _check_plain_settings(
    module: types.ModuleType, search_space: Mapping[str, Domain], shown: str
) -> None:
    raw = getattr(module, "BASELINE", None)
    if isinstance(raw, Knobs):
        raw = Knobs().diff(raw)
    for source, names in (("BASELINE", list(raw or ())), ("SEARCH_SPACE", list(search_space))):
        code = [name for name in names if name in CODE_KNOBS]
        if code:
            raise PipelineFileError(
                f"{shown}: {source} sets {', '.join(code)}, but `make_dataset()` takes no "
                "knobs, so nothing would apply them. tfperf tunes the values written in your "
                "tf.data calls instead (`tfperf profile` lists them as call sites, e.g. "
                f"batch@{PurePath(shown).name}:LINE.batch_size): remove {', '.join(code)} "
                f"from {source}, or define `make_dataset(knobs)` and read them from the knobs."
            )


def _function(
    module: types.ModuleType,
    name: str,
    shown: str,
    *,
    required: bool,
    without: set[str] | None = None,
) -> Callable[[Knobs], Any] | None:
    """The function `name`, checked; one that takes nothing is wrapped (and added to
    `without`) when `without` is given, i.e. when the file may define it so."""
    if not hasattr(module, name) or (not required and getattr(module, name) is None):
        if required:
            raise PipelineFileError(
                f"{shown} defines no `{name}`; tfperf calls `{name}(knobs)` {_PURPOSE[name]}. "
                f"{_functions_found(module)}{_did_you_mean(module, [name])}"
            )
        return None
    function = getattr(module, name)
    if not callable(function):
        raise PipelineFileError(
            f"{shown}: `{name}` is a {type(function).__name__}, not a function; tfperf calls "
            f"`{name}(knobs)` {_PURPOSE[name]}. Define it with `def {name}(knobs):`, and check "
            f"that no later line assigns a value to `{name}`."
        )
    if without is not None and _takes_nothing(function):
        without.add(name)
        return _DropKnobs(function)
    if name != "make_dataset" or not takes_input_context(function):
        _check_signature(function, name, shown)
    return cast("Callable[[Knobs], Any]", function)


class _DropKnobs:
    """Calls a user function that takes no knobs, from code that passes them."""

    def __init__(self, function: Callable[[], Any]) -> None:
        self.__wrapped__ = function

    def __call__(self, knobs: Knobs) -> Any:
        return self.__wrapped__()


def _check_signature(function: Callable[..., Any], name: str, shown: str) -> None:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return  # Some builtins and extension callables hide their signature; trust them.
    try:
        signature.bind(None)
    except TypeError:
        raise PipelineFileError(
            f"{shown}: `{name}` must accept exactly one positional argument (the knobs), but its "
            f"signature is `{name}{signature}`. {_signature_fix(signature, name)}"
        ) from None


def _signature_fix(signature: inspect.Signature, name: str) -> str:
    kind = inspect.Parameter
    params = list(signature.parameters.values())
    positional = [p for p in params if p.kind in (kind.POSITIONAL_ONLY, kind.POSITIONAL_OR_KEYWORD)]
    if not positional:
        return f"Define it as `def {name}(knobs):` and read settings such as `knobs.batch_size`."
    variadic = (kind.VAR_POSITIONAL, kind.VAR_KEYWORD)
    extra = [
        p.name
        for p in params
        if p is not positional[0] and p.default is p.empty and p.kind not in variadic
    ]
    if not extra:
        return f"Define it as `def {name}(knobs):`."
    return (
        f"tfperf passes only the knobs, so give {', '.join(f'`{p}`' for p in extra)} a default "
        f"(e.g. `{extra[0]}=...`), or read the value from the knobs or a constant."
    )


def _no_training_message(module: types.ModuleType, shown: str, this: Framework) -> str:
    """What a file without a training function needs, in its framework's words."""
    wanted = [name for name, _ in this.training_functions]
    if len(wanted) == 1:
        head = f"{shown} defines no `{wanted[0]}`; tfperf needs it to measure training:\n"
    else:
        named = " nor ".join(f"`{name}`" for name in wanted)
        head = f"{shown} defines neither {named}; tfperf needs one of them to measure training:\n"
    options = ", or\n".join(
        f"  - `{name}(knobs)` returning {returns}" for name, returns in this.training_functions
    )
    emulated = (
        "\nTo measure the input alone feeding an accelerator of a known step time, give "
        "`--step-time` (e.g. `--step-time 5ms`): it needs no model."
        if this.emulates_step
        else ""
    )
    return f"{head}{options}.\n{_functions_found(module)}{_did_you_mean(module, wanted)}{emulated}"


def _functions_found(module: types.ModuleType) -> str:
    names = [
        name
        for name, value in vars(module).items()
        if inspect.isfunction(value) and value.__module__ == module.__name__
    ]
    return f"Functions found: {', '.join(names) if names else 'none'}."


def _did_you_mean(module: types.ModuleType, wanted: list[str]) -> str:
    names = [n for n, value in vars(module).items() if callable(value) and n not in _PURPOSE]
    for name in wanted:
        close = [c for c in difflib.get_close_matches(name, names, n=1, cutoff=0.75) if c != name]
        if close:
            return f" Did you mean `{close[0]}`? Rename it to `{name}`."
    return ""


def _baseline(module: types.ModuleType, shown: str) -> tuple[Knobs, bool]:
    raw = getattr(module, "BASELINE", None)
    if raw is None:
        return Knobs(), False
    if isinstance(raw, Knobs):
        return raw, True
    if not isinstance(raw, Mapping):
        raise PipelineFileError(
            f"{shown}: BASELINE must be a dict of knob values, e.g. "
            f'BASELINE = {{"batch_size": 64, "prefetch": 0}}, but it is a {type(raw).__name__} '
            f"({_short(raw)})."
        )
    try:
        return Knobs.from_mapping(raw, source=f"{shown}: BASELINE"), True
    except KnobError as error:
        raise PipelineFileError(str(error)) from error


def _search_space(module: types.ModuleType, shown: str) -> dict[str, Domain]:
    raw = getattr(module, "SEARCH_SPACE", None)
    if raw is None:
        return {}
    try:
        return parse_search_space(raw, source=f"{shown}: SEARCH_SPACE")
    except KnobError as error:
        raise PipelineFileError(str(error)) from error


def _short(value: Any, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."
