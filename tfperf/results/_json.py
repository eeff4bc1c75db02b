"""Saving dataclasses as JSON and loading them back validated, for every result type."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tfperf.errors import ResultFileError

if TYPE_CHECKING:
    from pydantic import TypeAdapter

R = TypeVar("R", bound="JsonRecord")


class JsonRecord:
    """Mixin for result dataclasses: `to_dict`, `to_json`, `save`, and validated loading.

    pydantic validates what is loaded (a hand-edited or truncated file fails with the field at
    fault), and is imported only on first use.
    """

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready nested dicts (enums as their string values)."""
        data: dict[str, Any] = _adapter(type(self)).dump_python(self, mode="json")
        return data

    def to_json(self, *, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def save(self, path: str | Path) -> Path:
        """Writes the JSON to `path`, creating its folder; returns the path written."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(self.to_json() + "\n", encoding="utf-8")
        return target

    @classmethod
    def validate(cls: type[R], data: Any) -> R:
        """Rebuilds an instance from `to_dict` output.

        Raises:
            ResultFileError: the data does not match the class's fields.
        """
        from pydantic import ValidationError

        try:
            result: R = _adapter(cls).validate_python(data)
        except ValidationError as error:
            raise ResultFileError(
                f"result does not match the {cls.__name__} schema: {error}"
            ) from None
        return result


_ADAPTERS: dict[type[Any], TypeAdapter[Any]] = {}


def _adapter(cls: type[Any]) -> TypeAdapter[Any]:
    # Building an adapter walks the whole dataclass tree: once per class is enough.
    if cls not in _ADAPTERS:
        from pydantic import TypeAdapter

        _ADAPTERS[cls] = TypeAdapter(cls)
    return _ADAPTERS[cls]
