"""Saving dataclasses as JSON and loading them back validated, for every record type.

Every dataclass tfperf reads back from JSON (a result file, a child process's answer, a
request, a study's stored record) is checked by pydantic through `validated`, so bad input fails
with one message that names each field at fault by its path (`sites[0].form`) and the value
found there.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from tfperf.errors import KnobError, ResultFileError, TfperfError
from tfperf.knobs import KNOBS, Knobs

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler, TypeAdapter, ValidationError
    from pydantic_core import CoreSchema

R = TypeVar("R", bound="JsonRecord")
T = TypeVar("T")

#: How much of a wrong value a message quotes.
_SHOWN_CHARS = 60
#: How many field errors a message lists before it counts the rest.
_SHOWN_ERRORS = 5


class JsonRecord:
    """Mixin for result dataclasses: `to_dict`, `to_json`, `save`, and validated loading.

    pydantic validates what is loaded (a hand-edited or truncated file fails with the field at
    fault), and is imported only on first use.
    """

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready nested dicts (enums as their string values, tuples as lists)."""
        data: dict[str, Any] = _adapter(type(self)).dump_python(self, mode="json")
        return data

    def to_json(self, *, indent: int | None = 2) -> str:
        """Strict JSON (`tfperf.outputs.json_text`): a figure that is not finite is null."""
        from tfperf.outputs import json_text

        return json_text(self.to_dict(), indent=indent)

    def save(self, path: str | Path) -> Path:
        """Writes the JSON to `path` atomically, creating its folder; returns the path written.

        Through `tfperf.outputs.write_text`: a path that is not a regular file is refused.
        """
        from tfperf.outputs import write_text

        return write_text(Path(path), self.to_json() + "\n", "--json")

    @classmethod
    def validate(cls: type[R], data: Any) -> R:
        """Rebuilds an instance from `to_dict` output.

        Raises:
            ResultFileError: the data does not match the class's fields.
        """
        return validated(cls, data)


def validated(
    cls: type[T],
    data: Any,
    *,
    source: str = "result",
    error: type[TfperfError] = ResultFileError,
    strict: bool = False,
) -> T:
    """`data` (decoded JSON) as an instance of the dataclass `cls`, checked by pydantic.

    Keys the class does not know are ignored, so a record may carry extra keys for its reader.

    Args:
        source: what `data` is, for the message: "result", "the request file r.json".
        error: the exception raised when `data` does not fit.
        strict: take every value only in its exact JSON type (no "5" or 5.0 for an int, no
            true for 1), as pydantic's strict JSON mode does; otherwise pydantic's lax mode
            converts what it safely can.

    Raises:
        error: `data` does not match `cls`; the message lists each field at fault.

    Example:
        >>> import dataclasses
        >>> @dataclasses.dataclass
        ... class Point:
        ...     x: int
        >>> validated(Point, {"x": "1"})
        Point(x=1)
        >>> validated(Point, {})
        Traceback (most recent call last):
        tfperf.errors.ResultFileError: result does not match the Point schema: x: missing
    """
    from pydantic import ValidationError

    adapter = _adapter(cls)
    try:
        if strict:
            # Strict JSON mode knows JSON's types: an array fills a tuple, a string an enum.
            result: T = adapter.validate_json(json.dumps(data, allow_nan=False), strict=True)
        else:
            result = adapter.validate_python(data)
    except ValidationError as problem:
        raise error(
            f"{source} does not match the {cls.__name__} schema: {describe_errors(problem)}"
        ) from None
    except (TypeError, ValueError) as problem:  # json.dumps: not JSON data at all
        raise error(f"{source} is not JSON data ({problem}): {_shown(data)}") from None
    return result


def describe_errors(problem: ValidationError) -> str:
    """pydantic's errors on one line: `sites[0].form: Input should be ... (got 'kw')`."""
    errors = problem.errors(include_url=False)
    parts = [_describe_error(item) for item in errors[:_SHOWN_ERRORS]]
    if len(errors) > _SHOWN_ERRORS:
        parts.append(f"and {len(errors) - _SHOWN_ERRORS} more")
    return "; ".join(parts)


def _describe_error(item: Any) -> str:
    path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in item["loc"])
    where = path.lstrip(".") or "the top level"
    if item["type"] == "missing":
        return f"{where}: missing"
    return f"{where}: {item['msg']} (got {_shown(item['input'])})"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


_ADAPTERS: dict[type[Any], TypeAdapter[Any]] = {}


def _adapter(cls: type[Any]) -> TypeAdapter[Any]:
    # Building an adapter walks the whole dataclass tree: once per class is enough.
    if cls not in _ADAPTERS:
        from pydantic import TypeAdapter

        _ADAPTERS[cls] = TypeAdapter(cls)
    return _ADAPTERS[cls]


class _KnobsSchema:
    """How pydantic reads and writes a `Knobs` field: the `to_dict()` mapping, both ways.

    Records stored their knobs as that plain mapping before they held a `Knobs`, so the JSON
    keeps its shape and files written either way load. pydantic is imported only when a
    record's schema is first built.
    """

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        from pydantic_core import core_schema

        return core_schema.no_info_plain_validator_function(
            as_knobs,
            serialization=core_schema.plain_serializer_function_ser_schema(
                _knobs_dict, when_used="always"
            ),
        )


def as_knobs(value: Any) -> Knobs:
    """`value` as `Knobs`: a `Knobs` as it is, a mapping (`to_dict()`'s shape) through
    `from_mapping` of the declared record (`KNOBS.record`).

    Raises:
        ValueError: `value` is not a mapping, or holds a name or value `Knobs` refuses (pydantic
            reports a ValueError under the field's path).
    """
    if isinstance(value, Knobs):
        return value
    if not isinstance(value, Mapping):
        raise ValueError(f"knobs must be a mapping of knob names to values, not {value!r}")
    try:
        # The registry's record: a test may declare a knob on a subclass of `Knobs`.
        return KNOBS.record.from_mapping(value)
    except KnobError as error:
        raise ValueError(str(error)) from None


def _knobs_dict(knobs: Knobs) -> dict[str, Any]:
    return knobs.to_dict()


#: A record's `Knobs` field, stored as `Knobs.to_dict()` and read back through
#: `Knobs.from_mapping`.
KnobsField = Annotated[Knobs, _KnobsSchema()]


def plain_dict(record: Any) -> dict[str, Any]:
    """`dataclasses.asdict(record)`, with every `Knobs` inside as its `to_dict()`.

    For records stored as plain values (a study's user attributes) rather than through
    pydantic: `asdict` alone would leave a `Knobs`'s call sites as a `SiteValues`, which JSON
    cannot hold, and its precision as an enum.
    """
    plain: dict[str, Any] = _plain(record)
    return plain


def _plain(value: Any) -> Any:
    if isinstance(value, Knobs):
        return value.to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            field.name: _plain(getattr(value, field.name)) for field in dataclasses.fields(value)
        }
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, tuple):
        items = [_plain(item) for item in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if isinstance(value, dict):
        return {_plain(key): _plain(item) for key, item in value.items()}
    return copy.deepcopy(value)
