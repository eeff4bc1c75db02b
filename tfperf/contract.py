"""The contract of a pipeline file: which functions and settings it must define, and how.

A pipeline file defines `make_dataset(knobs)` and `make_model(knobs)` or `make_train_step(knobs)`
(the train step wins when both exist), each callable with the knobs alone, and optionally
`BASELINE` (the knobs the user runs today) and `SEARCH_SPACE` (what `tfperf tune` may change).
Every breach raises `PipelineFileError` naming the file, what was found and the fix.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import types
from collections.abc import Callable, Mapping
from typing import Any, cast

from tfperf.errors import KnobError, PipelineFileError
from tfperf.knobs import Knobs
from tfperf.space import Domain, parse_search_space

__all__ = ["Contract", "check_contract"]

_PURPOSE = {
    "make_dataset": "to build the pipeline",
    "make_model": "to build the model it trains on each batch",
    "make_train_step": "to build the step it runs on each batch",
}


@dataclasses.dataclass(frozen=True)
class Contract:
    """What a pipeline module provides, checked. One of the two training functions is set."""

    make_dataset: Callable[[Knobs], Any]
    make_model: Callable[[Knobs], Any] | None
    make_train_step: Callable[[Knobs], Any] | None
    baseline: Knobs
    has_baseline: bool
    search_space: dict[str, Domain]


def check_contract(module: types.ModuleType, shown: str) -> Contract:
    """Checks what an executed pipeline module defines; `shown` names the file in messages.

    Raises:
        PipelineFileError: a required function is missing, not callable or cannot take the
            knobs, or `BASELINE` / `SEARCH_SPACE` is invalid.
    """
    make_dataset = _function(module, "make_dataset", shown, required=True)
    assert make_dataset is not None  # required=True raises instead of returning None
    make_model = _function(module, "make_model", shown, required=False)
    make_train_step = _function(module, "make_train_step", shown, required=False)
    if make_model is None and make_train_step is None:
        raise PipelineFileError(_no_training_message(module, shown))
    baseline, has_baseline = _baseline(module, shown)
    return Contract(
        make_dataset=make_dataset,
        make_model=make_model,
        make_train_step=make_train_step,
        baseline=baseline,
        has_baseline=has_baseline,
        search_space=_search_space(module, shown),
    )


def _function(
    module: types.ModuleType, name: str, shown: str, *, required: bool
) -> Callable[[Knobs], Any] | None:
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
    _check_signature(function, name, shown)
    return cast("Callable[[Knobs], Any]", function)


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


def _no_training_message(module: types.ModuleType, shown: str) -> str:
    return (
        f"{shown} defines neither `make_model` nor `make_train_step`; tfperf needs one of them "
        "to measure training:\n"
        "  - `make_model(knobs)` returning a compiled Keras model, which tfperf trains on each "
        "batch, or\n"
        "  - `make_train_step(knobs)` returning a callable that tfperf runs on each batch (e.g. "
        "a `tf.function` doing one optimizer step).\n"
        f"{_functions_found(module)}{_did_you_mean(module, ['make_model', 'make_train_step'])}"
    )


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
