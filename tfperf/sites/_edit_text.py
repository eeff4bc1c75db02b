"""The text of a structure edit in the user's file: `.cache()` appended, two calls swapped.

A structure edit's site (the TensorFlow implementation's `_edits`) carries the span of the map
it is made at.
The map is found again in the file's syntax tree by where it ends; then:

- `cache@...added`: `.cache()` is appended to the map call;
- `shuffle@...before_map` and `map@...after_batch`: the map and the call that reads it (the
  `shuffle` or `batch`) swap places. That call must be chained to the map
  (`ds.map(f).shuffle(9)`) or be made on the map's variable in the next statement
  (`ds = ds.map(f)` then `ds = ds.shuffle(9)`); a statement left as `ds = ds` is deleted. A map
  moved after `batch` gets a comment saying so (`--reorder` may change what it computes).

A call that moves carries the argument edits made inside it (`inner`: a map whose
`num_parallel_calls` the patch also sets moves with the new value); the caller drops those
edits from its own list (`carried`), since the span they were in is deleted.

Every result is parsed before it is offered: an edit that would break the file is refused,
with the reason, and the study does not search it (`tfperf.sites._handover.unplaceable`).

No TensorFlow here.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Sequence

from tfperf.results.discovery import CallSite
from tfperf.sites._callee import callee

#: The call that reads the map, for each swap.
_READER = {("shuffle", "before_map"): "shuffle", ("map", "after_batch"): "batch"}
REORDER_COMMENT = "# tfperf --reorder: this map now runs on whole batches; check its result"


@dataclasses.dataclass(frozen=True)
class TextEdit:
    """Replace bytes [start, end) of the file by `text`."""

    start: int
    end: int
    text: str


def describe_edit(site: CallSite) -> str:
    """One line for the terminal: what the edit at `site` does."""
    where = f"{site.file}:{site.line}"
    if (site.method, site.argument) == ("cache", "added"):
        return f"{site.name}: cache() added after the map at {where}"
    if (site.method, site.argument) == ("shuffle", "before_map"):
        return f"{site.name}: the shuffle moved before the map at {where}"
    return (
        f"{site.name}: the map at {where} moved after its batch (--reorder: it now runs on "
        "whole batches; check it computes the same)"
    )


def structure_edits(
    data: bytes, tree: ast.Module, site: CallSite, inner: Sequence[TextEdit] = ()
) -> list[TextEdit] | str:
    """The edits that make the structure edit of `site` in a file, or why they cannot be.

    `inner` are the patch's other edits: a moved call's text carries those inside it.
    """
    text = _Text(data, tree, inner)
    maps = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and callee(node) == "map"
        and (node.end_lineno, node.end_col_offset) == (site.end_line, site.end_col)
    ]
    if len(maps) != 1 or not isinstance(maps[0].func, ast.Attribute):
        return f"no `map(...)` call is where tfperf found it at {site.where} (the file changed)"
    mapped = maps[0]
    if (site.method, site.argument) == ("cache", "added"):
        edits = [TextEdit(text.end(mapped), text.end(mapped), ".cache()")]
    else:
        reader = _reader_of(text, mapped, _READER[(site.method, site.argument)])
        if isinstance(reader, str):
            return f"{reader} at {site.where}"
        edits = _swap(text, mapped, reader, site.method == "map")
    new = _applied(data, [*edits, *(e for e in inner if not carried(e, edits))])
    try:
        ast.parse(new.decode("utf-8"))
    except SyntaxError as error:
        return f"the edit at {site.where} would not parse ({error.msg}): make it by hand"
    return edits


def _swap(text: _Text, mapped: ast.Call, reader: ast.Call, reorder: bool) -> list[TextEdit]:
    """`receiver.map(f).reader(n)` -> `receiver.reader(n).map(f)`, with the statement of a
    variable assigned to itself deleted."""
    own_map, own_reader = text.own_call(mapped), text.own_call(reader)
    map_from, reader_from = text.dot(mapped), text.dot(reader)
    if reorder:  # the map leaves its place and follows the reader
        removed = text.self_assignment(mapped) or (map_from, text.end(mapped))
        edits = [TextEdit(*removed, ""), TextEdit(text.end(reader), text.end(reader), own_map)]
        statement = text.statement_of(reader)
        if statement is not None and text.starts_line(statement):
            start = text.offset(statement.lineno, 0)
            indent = " " * statement.col_offset
            edits.append(TextEdit(start, start, f"{indent}{REORDER_COMMENT}\n"))
        return edits
    removed = text.self_assignment(reader) or (reader_from, text.end(reader))
    return [TextEdit(map_from, map_from, own_reader), TextEdit(*removed, "")]


def _reader_of(text: _Text, mapped: ast.Call, method: str) -> ast.Call | str:
    """The `method(...)` call that reads the map's result, chained or in the next statement."""
    chained = text.parent.get(text.parent.get(mapped))  # type: ignore[arg-type]
    if (
        isinstance(chained, ast.Call)
        and isinstance(chained.func, ast.Attribute)
        and chained.func.value is mapped
        and chained.func.attr == method
    ):
        return chained
    assigned = _name_assignment(text.parent.get(mapped), mapped)
    if assigned is None:
        return f"the `{method}(...)` reading the map is not chained to it nor in the next line"
    statement, variable = assigned
    following = text.next_statement(statement)
    found = [
        node
        for node in (ast.walk(following) if following is not None else ())
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == method
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == variable
    ]
    if len(found) != 1:
        return (
            f"the statement after the map does not hold one `{variable}.{method}(...)` reading it"
        )
    return found[0]


def carried(edit: TextEdit, structure: Sequence[TextEdit]) -> bool:
    """Whether `edit` lies inside a span a structure edit deletes (its text moved with it)."""
    return any(
        s.start < s.end and s.start <= edit.start and edit.end <= s.end and s.text == ""
        for s in structure
    )


class _Text:
    """One file's bytes and tree: offsets, parents, and the spans an edit needs."""

    def __init__(self, data: bytes, tree: ast.Module, inner: Sequence[TextEdit] = ()) -> None:
        self.data = data
        self.inner = sorted(inner, key=lambda e: e.start)
        self.starts = [0] + [i + 1 for i, byte in enumerate(data) if byte == 0x0A]
        self.parent: dict[ast.AST, ast.AST] = {
            child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)
        }

    def offset(self, line: int, col: int) -> int:
        return self.starts[line - 1] + col

    def end(self, node: ast.AST) -> int:
        return self.offset(getattr(node, "end_lineno", 0) or 0, getattr(node, "end_col_offset", 0))

    def dot(self, call: ast.Call) -> int:
        """Where `.method(...)` of `call` starts, after its receiver (and any space before)."""
        assert isinstance(call.func, ast.Attribute)
        attr_start = self.end(call.func) - len(call.func.attr.encode())
        dot = self.data.rindex(b".", 0, attr_start)
        while dot > 0 and self.data[dot - 1 : dot] in (b" ", b"\t", b"\n", b"\r"):
            dot -= 1
        return dot

    def own_call(self, call: ast.Call) -> str:
        """`.method(arguments)` of `call`, with the other edits made inside it."""
        assert isinstance(call.func, ast.Attribute)
        start = self.end(call.func) - len(call.func.attr.encode())
        end = self.end(call)
        out, at = b".", start
        for edit in self.inner:
            if start <= edit.start and edit.end <= end:
                out += self.data[at : edit.start] + edit.text.encode("utf-8")
                at = edit.end
        return (out + self.data[at:end]).decode("utf-8")

    def self_assignment(self, call: ast.Call) -> tuple[int, int] | None:
        """The lines of `x = x.method(...)` (the whole statement is `call`), else None."""
        assigned = _name_assignment(self.parent.get(call), call)
        if not (
            assigned is not None
            and isinstance(call.func, ast.Attribute)
            and isinstance(call.func.value, ast.Name)
            and call.func.value.id == assigned[1]
            and self.starts_line(assigned[0])
        ):
            return None
        statement = assigned[0]
        start = self.offset(statement.lineno, 0)
        end = self.end(statement)
        newline = self.data.find(b"\n", end)
        rest = self.data[end : len(self.data) if newline < 0 else newline + 1]
        if rest.strip():
            return None  # a comment or another statement after it: keep the line
        return start, end + len(rest)

    def starts_line(self, statement: ast.stmt) -> bool:
        start = self.offset(statement.lineno, 0)
        return not self.data[start : start + statement.col_offset].strip()

    def statement_of(self, node: ast.AST) -> ast.stmt | None:
        current: ast.AST | None = node
        while current is not None and not isinstance(current, ast.stmt):
            current = self.parent.get(current)
        return current

    def next_statement(self, statement: ast.stmt) -> ast.stmt | None:
        holder = self.parent.get(statement)
        for _, value in ast.iter_fields(holder) if holder is not None else ():
            if isinstance(value, list) and statement in value:
                index = value.index(statement)
                return value[index + 1] if index + 1 < len(value) else None
        return None


def _applied(data: bytes, edits: list[TextEdit]) -> bytes:
    for edit in sorted(edits, key=lambda e: (e.start, e.end), reverse=True):
        data = data[: edit.start] + edit.text.encode("utf-8") + data[edit.end :]
    return data


def _name_assignment(statement: ast.AST | None, value: ast.expr) -> tuple[ast.Assign, str] | None:
    """The statement and `x` where `statement` is `x = value`, else None."""
    if (
        isinstance(statement, ast.Assign)
        and statement.value is value
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
    ):
        return statement, statement.targets[0].id
    return None
