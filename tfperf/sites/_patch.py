"""Writes chosen call-site values into the user's files, as a unified diff they can apply.

Each change names a `CallSite` (found while the dataset was built) and its new value. The call
is found again in the file's syntax tree by its end position (or, where only the line is known,
by its method on that line), and its argument is rewritten in place: a keyword's value, a
positional argument, or `, name=value` added when the call left it out. AUTOTUNE is written the
way the file already spells it (`tf.data.AUTOTUNE` under `import tensorflow as tf`).

Only literals are rewritten: a number, None, or an `AUTOTUNE` name. An argument that is a
variable or an expression is left alone and reported as a `ManualEdit` naming the line and the
value to set by hand; so is a call the file no longer holds (it was edited since).

The diff's headers are `--- ./FILE` and `+++ ./FILE`, relative to the pipeline's folder: from
that folder both `patch -p0 < FILE.patch` and `git apply FILE.patch` accept it.

No TensorFlow here.

Example:
    >>> patch = make_patch(Path("."), [Change(site, 8)])  # doctest: +SKIP
    >>> print(patch.diff)  # doctest: +SKIP
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from tfperf.knobs import AUTOTUNE, SiteKind, format_site_value
from tfperf.knobs.declare import site_check
from tfperf.results.discovery import ArgumentForm, CallSite
from tfperf.sites._callee import callee, name_line
from tfperf.sites._edit_text import TextEdit, carried, describe_edit, structure_edits
from tfperf.sites._insert import (
    NOTHING_ADDED,
    TENSORFLOW,
    Additions,
    Anchor,
    imported,
    insert_edits,
)


@dataclasses.dataclass(frozen=True)
class Change:
    """A call site and the value to write there."""

    site: CallSite
    value: int | None

    def describe(self) -> str:
        if self.site.kind is SiteKind.EDIT:  # a cache added, a call moved: the recorder
            return describe_edit(self.site)
        if self.site.calls == 0:
            return (
                f"{self.site.name}: prefetch({_shown(self.value)}) added after the interleave "
                f"at {self.site.where}"
            )
        # "not set": the one word every report uses for a value left to tf.data.
        shown = _flag if self.site.kind is SiteKind.FLAG else _shown
        old = "not set" if self.site.form is ArgumentForm.ABSENT else shown(self.site.value)
        return f"{self.site.name}: {old} -> {shown(self.value)}"


@dataclasses.dataclass(frozen=True)
class ManualEdit:
    """A change tfperf could not write safely: where, and what to do by hand."""

    change: Change
    instruction: str

    def describe(self) -> str:
        return f"{self.change.site.where}: {self.instruction}"


@dataclasses.dataclass(frozen=True)
class Patch:
    """The diff of every change written, and the changes left to do by hand."""

    diff: str
    written: tuple[Change, ...]
    manual: tuple[ManualEdit, ...]
    # The code tfperf applied itself (options, precision, an added prefetch): inserted in the
    # diff, or, when it cannot be placed, one sentence saying what to add and where.
    added: Additions = NOTHING_ADDED
    manual_additions: tuple[str, ...] = ()
    # Each file the diff changes (relative to the root) and its new content.
    files: tuple[tuple[str, bytes], ...] = ()

    def describe(self) -> list[str]:
        """Lines for a terminal: each change, what is inserted, then what to edit by hand."""
        lines = []
        for change in self.written:
            lines.append(f"  {change.describe()}")
            # A knob that is not input-only in every pipeline says what to check (its
            # declaration's `check_note`).
            if (check := site_check(change.site.name, change.value)) is not None:
                lines.append(f"    check: {check}")
        lines += [f"  added: {line}" for line in self.added.describe()]
        if self.manual or self.manual_additions:
            lines.append("Change by hand (tfperf could not write these safely):")
            lines.extend(f"  {edit.describe()}" for edit in self.manual)
            lines.extend(f"  {text}" for text in self.manual_additions)
        return lines

    def manual_sentences(self) -> list[str]:
        """Every edit left to do by hand, each a complete sentence."""
        return [edit.describe() for edit in self.manual] + list(self.manual_additions)


@dataclasses.dataclass(frozen=True)
class _Edit:
    start: int  # byte offsets in the file
    end: int
    text: str


def changes_between(sites: Iterable[CallSite], chosen: Mapping[str, int | None]) -> list[Change]:
    """The sites whose value in `chosen` differs from what the file passes today.

    A site absent from `chosen`, or chosen as None or as its value where the call leaves the
    argument out (the default it runs with), needs no change.
    """
    changes = []
    for site in sites:
        if site.name not in chosen or (site.calls == 0 and site.col is None):
            continue  # the prefetch added where the dataset is handed over: `inserted_prefetch`
        value = chosen[site.name]
        if site.calls == 0:  # a structure edit: written when it adds the call
            if value is not None and value != 0:
                changes.append(Change(site, value))
            continue
        unchanged = value == site.value or (value is None and site.form is ArgumentForm.ABSENT)
        if not unchanged:
            changes.append(Change(site, value))
    return changes


def inserted_prefetch(sites: Iterable[CallSite], chosen: Mapping[str, int | None]) -> int | None:
    """The buffer of the `prefetch` tfperf added at the end of the pipeline, None for none.

    That site has no columns; one with columns is a prefetch added after a call (an edit).
    """
    for site in sites:
        if site.calls == 0 and site.method == "prefetch" and site.col is None:
            value = chosen.get(site.name)
            if value is not None and value != 0:
                return value
    return None


def make_patch(
    root: Path,
    changes: Sequence[Change],
    anchor: Anchor | None = None,
    additions: Additions = NOTHING_ADDED,
) -> Patch:
    """Rewrites `changes` in the files under `root` (read, never written) and diffs them.

    `additions` (what tfperf applied itself) are inserted where the dataset is handed over,
    `anchor`; without one they are left to do by hand.

    Returns:
        A `Patch`: `diff` is "" when no change could be written.
    """
    diffs: list[str] = []
    written: list[Change] = []
    manual: list[ManualEdit] = []
    contents: list[tuple[str, bytes]] = []
    files = {change.site.file for change in changes}
    if additions and anchor is not None:
        files.add(anchor.file)
    added, by_hand_added = (
        Additions(),
        []
        if anchor is not None or not additions
        else [_add_by_hand(additions, "tfperf does not know where the dataset is handed over")],
    )
    for file in sorted(files):
        in_file = [change for change in changes if change.site.file == file]
        here = additions if anchor is not None and anchor.file == file else Additions()
        diff, done, by_hand, problem, new = _patch_file(root, file, in_file, anchor, here)
        diffs.append(diff)
        if diff:
            contents.append((file, new))
        written.extend(done)
        manual.extend(by_hand)
        if problem is not None:
            by_hand_added.append(_add_by_hand(here, problem))
        elif here:
            added = here
    return Patch(
        "".join(diffs),
        tuple(written),
        tuple(manual),
        added,
        tuple(by_hand_added),
        tuple(contents),
    )


def _add_by_hand(additions: Additions, reason: str) -> str:
    code = "; ".join(additions.describe())
    return (
        f"Add by hand where your dataset is handed over (to fit or your own loop, or returned "
        f"by make_dataset) and "
        f"before the model is built ({reason}): {code}."
    )


def _patch_file(
    root: Path,
    file: str,
    changes: list[Change],
    anchor: Anchor | None = None,
    additions: Additions = NOTHING_ADDED,
) -> tuple[str, list[Change], list[ManualEdit], str | None, bytes]:
    try:
        data = (root / file).read_bytes()
        tree = ast.parse(data.decode("utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError) as error:
        reason = f"tfperf cannot read {file} now ({type(error).__name__}: {error})"
        refused = [ManualEdit(change, _by_hand(change, reason)) for change in changes]
        return "", [], refused, reason if additions else None, b""
    source = _Source(data, tree)
    edits: list[_Edit] = []
    problem = None
    if additions and anchor is not None:
        inserted = insert_edits(data.decode("utf-8"), anchor, additions)
        if isinstance(inserted, str):
            problem = inserted
        else:
            edits += [_Edit(at, at, e.text) for e in inserted for at in [source.at(e.line, e.col)]]
    written: list[Change] = []
    manual: list[ManualEdit] = []
    arguments: list[TextEdit] = []
    for change in changes:
        if change.site.kind is SiteKind.EDIT:
            continue
        edit = source.edit(change)
        if isinstance(edit, str):
            manual.append(ManualEdit(change, _by_hand(change, edit)))
        else:
            arguments.append(TextEdit(edit.start, edit.end, edit.text))
            written.append(change)
    # Structure edits last (sites/_edit_text.py): a call they move carries its argument edits.
    structure: list[TextEdit] = []
    for change in changes:
        if change.site.kind is not SiteKind.EDIT:
            continue
        made = structure_edits(data, tree, change.site, arguments)
        if isinstance(made, str):
            manual.append(ManualEdit(change, made))
        else:
            structure += made
            written.append(change)
    kept = [edit for edit in arguments if not carried(edit, structure)]
    edits += [_Edit(each.start, each.end, each.text) for each in [*kept, *structure]]
    new = _apply(data, edits)
    diff = _unified(file, data.decode("utf-8"), new.decode("utf-8"))
    return diff, written, manual, problem, new


class _Source:
    """One file's bytes and syntax tree, and how to find a call and rewrite one argument."""

    def __init__(self, data: bytes, tree: ast.Module) -> None:
        self.data = data
        self.starts = _line_starts(data)
        self.calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
        self.autotune = _autotune_spelling(tree, data)

    def edit(self, change: Change) -> _Edit | str:
        """The edit for one change, or why it cannot be made safely."""
        site = change.site
        call = self._find(site, "interleave" if site.calls == 0 else site.method)
        if isinstance(call, str):
            return call
        text = self._value_text(change.value, site.kind)
        if text is None:
            return "the file imports no tensorflow to spell AUTOTUNE with"
        if site.calls == 0:  # append the call tfperf added after this one
            at = self._end(call)
            return _Edit(at, at, f".{site.method}({text})")
        if site.form is ArgumentForm.ABSENT:
            return self._insert(call, site.argument, text)
        target = _argument_node(call, site)
        if target is None:
            return (
                f"`{site.method}(...)` no longer passes {site.argument} as tfperf saw it "
                "(the file changed since): run tfperf again"
            )
        return self._replace(target, site, text)

    def _find(self, site: CallSite, method: str) -> ast.Call | str:
        named = [call for call in self.calls if callee(call) == method]
        if site.end_line is not None and site.end_col is not None:
            found = [
                c
                for c in named
                if (c.end_lineno, c.end_col_offset) == (site.end_line, site.end_col)
            ]
        else:
            found = [c for c in named if name_line(c) == site.line]
        if len(found) == 1:
            return found[0]
        if not found:
            return (
                f"no `{method}(...)` call is where tfperf found it (the file changed "
                "since): run tfperf again"
            )
        return (
            f"line {site.line} holds {len(found)} `{method}(...)` calls and tfperf cannot "
            "tell them apart"
        )

    def _replace(self, node: ast.expr, site: CallSite, text: str) -> _Edit | str:
        literal, value = _literal(node)
        segment = self._segment(node)
        if not literal:
            return f"{site.argument} is `{segment}` there, not a literal tfperf can rewrite"
        if value != site.value:
            return (
                f"{site.argument} is now {segment}, not {_shown(site.value)} as measured (the "
                "file changed since): run tfperf again"
            )
        return _Edit(self._offset(node.lineno, node.col_offset), self._end(node), text)

    def _insert(self, call: ast.Call, argument: str, text: str) -> _Edit:
        parts: list[ast.expr | ast.keyword] = [*call.args, *call.keywords]
        if parts:
            last = max(parts, key=lambda part: (part.end_lineno or 0, part.end_col_offset or 0))
            at = self._end(last)
            return _Edit(at, at, f", {argument}={text}")
        at = self.data.index(b"(", self._end(call.func)) + 1
        return _Edit(at, at, f"{argument}={text}")

    def _value_text(self, value: int | None, kind: SiteKind) -> str | None:
        if kind is SiteKind.FLAG:  # a DataLoader switch, held as 0 or 1
            return str(bool(value))
        if value == AUTOTUNE:
            return self.autotune
        return str(value)

    def at(self, line: int, col: int) -> int:
        """The byte offset of (line, col)."""
        return self._offset(line, col)

    def _offset(self, line: int, col: int) -> int:
        return self.starts[line - 1] + col

    def _end(self, node: ast.expr | ast.keyword) -> int:
        return self._offset(node.end_lineno or 0, node.end_col_offset or 0)

    def _segment(self, node: ast.expr) -> str:
        start = self._offset(node.lineno, node.col_offset)
        return self.data[start : self._end(node)].decode("utf-8")


def _argument_node(call: ast.Call, site: CallSite) -> ast.expr | None:
    if site.form is ArgumentForm.KEYWORD:
        return next((kw.value for kw in call.keywords if kw.arg == site.argument), None)
    index = site.index
    if index is None or index >= len(call.args):
        return None
    if any(isinstance(arg, ast.Starred) for arg in call.args[: index + 1]):
        return None  # `*args` moves positions: the node at `index` is not the argument
    return call.args[index]


def _literal(node: ast.expr) -> tuple[bool, int | None]:
    """Whether `node` is a value tfperf may overwrite, and that value."""
    if isinstance(node, ast.Constant) and node.value is None:
        return True, None
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        return True, int(node.value)  # a switch (`pin_memory=True`), held as 0 or 1
    number = _int_of(node)
    if number is not None:
        return True, number
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        number = _int_of(node.operand)
        if number is not None:
            return True, -number
    if _is_autotune(node):
        return True, AUTOTUNE
    return False, None


def _int_of(node: ast.AST) -> int | None:
    if not isinstance(node, ast.Constant):
        return None
    value = node.value
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _is_autotune(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "AUTOTUNE") or (
        isinstance(node, ast.Name) and node.id == "AUTOTUNE"
    )


def _autotune_spelling(tree: ast.Module, data: bytes) -> str | None:
    """How this file writes AUTOTUNE: as it already does, else through its tensorflow import."""
    for node in ast.walk(tree):
        if _is_autotune(node):
            segment = ast.get_source_segment(data.decode("utf-8"), node)
            if segment and "\n" not in segment:
                return segment
    for node in tree.body:
        spelling = _spelling_from_import(node)
        if spelling:
            return spelling
    return None


def _spelling_from_import(node: ast.stmt) -> str | None:
    tf = imported([node], TENSORFLOW)
    if tf:
        return f"{tf}.data.AUTOTUNE"
    data = imported([node], TENSORFLOW, "data")
    if data:
        return f"{data}.AUTOTUNE"
    for module in (f"{TENSORFLOW}.data", f"{TENSORFLOW}.data.experimental"):
        spelled = imported([node], module, "AUTOTUNE")
        if spelled:
            return spelled
    return None


def _apply(data: bytes, edits: list[_Edit]) -> bytes:
    # Last first, so earlier offsets stay valid; two insertions at one point keep their order.
    for edit in sorted(edits, key=lambda e: (e.start, e.end), reverse=True):
        data = data[: edit.start] + edit.text.encode("utf-8") + data[edit.end :]
    return data


def _line_starts(data: bytes) -> list[int]:
    starts = [0]
    for index, byte in enumerate(data):
        if byte == 0x0A:
            starts.append(index + 1)
    return starts


def _unified(file: str, old: str, new: str) -> str:
    if old == new:
        return ""
    shown = f"./{file}"
    lines = difflib.unified_diff(_lines(old), _lines(new), shown, shown)
    # A last line without a newline needs git's marker, or the next line would join it.
    return "".join(
        line if line.endswith("\n") else f"{line}\n\\ No newline at end of file\n" for line in lines
    )


def _lines(text: str) -> list[str]:
    # Split on "\n" alone: str.splitlines() also splits on form feeds and other separators.
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _by_hand(change: Change, reason: str) -> str:
    site = change.site
    return f"set {site.argument} of `{site.method}(...)` to {_shown(change.value)} ({reason})"


def _flag(value: int | None) -> str:
    return "not set" if value is None else str(bool(value))


def _shown(value: int | None) -> str:
    return format_site_value(value).split(" ")[0]
