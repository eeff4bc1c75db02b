"""Where a library's `DataLoader` argument came from: a default of the script's own options.

A loader built inside a library (`fastlib.create_loader(data, num_workers=args.workers)`) has
no call in the user's files to rewrite, but its value often travels there from one: an
`add_argument("-j", "--workers", default=4)` the user's call passes on. While the script runs,
`recording_options` records the `add_argument` calls made from the user's files (each
action's `dest` and `default`, and where the call is written); `trace` follows one argument
of the library's `DataLoader` back to such an option, and only where all of these hold:

- the user's line that reached the library passes `NAME.dest` as an argument, `NAME` an
  `argparse.Namespace` in that frame (a value copied into a variable first is not followed);
- that attribute holds what the `DataLoader` got, of the same type (`True` is not `1`);
- the option's default is that value too, and the command line does not give the option
  (nor an abbreviation of it): the run used the default, so changing the default changes
  what the library gets;
- one option fits; where two do, the one the user's call passes under the argument's own
  name (`num_workers=args.workers`), else none.

The user's own `DataLoader(data, num_workers=args.workers)` is traced the same way
(`trace_own`: only the expression written for that argument counts), so its value, too, is
tuned where it is written rather than left as an edit by hand.

A traced option is then a site like a `DataLoader(...)` call's argument, named by the
`add_argument` call's place (`DataLoader@train.py:12.num_workers`): overridden where the
library makes the loader, and patched as that option's `default=` (the site's `method` and
`argument` say where it is written: `add_argument`, `default`).

Not thread-safe: the wrapped `add_argument` is process-wide.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import functools
import os
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tfperf.frameworks import call_span
from tfperf.frameworks.torch._places import Place, call_of
from tfperf.results.discovery import ArgumentForm
from tfperf.sites import callee, name_line
from tfperf.tracebacks import is_user_file

#: The call an option is written with, as a patch finds it again.
ADD_ARGUMENT = "add_argument"


@dataclasses.dataclass(frozen=True)
class Option:
    """One `add_argument(...)` call of the user's: its `dest`, its default, where it is and
    whether `default=` is written (`ArgumentForm.KEYWORD`) or left to argparse (`ABSENT`)."""

    dest: str
    default: Any
    place: Place
    form: ArgumentForm
    flags: tuple[str, ...] = ()  # its option strings (`-j`, `--workers`); none: positional


class Options:
    """The options the user's files add while the script runs, by `dest`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.by_dest: dict[str, list[Option]] = {}

    def on_add(self, action: Any, kwargs: dict[str, Any], caller: types.FrameType) -> None:
        filename = caller.f_code.co_filename
        dest = getattr(action, "dest", None)
        if not isinstance(dest, str) or not is_user_file(filename, (self.root,)):
            return
        call = call_of(caller)
        if call is None or callee(call) != ADD_ARGUMENT:
            return  # not written `add_argument(...)`, or Python gives no columns
        _, end_line, _, end_col = call_span(caller)
        relative = Path(os.path.realpath(filename)).relative_to(self.root).as_posix()
        place = Place(
            relative,
            name_line(call),
            call.col_offset,
            end_line,
            end_col,
            call=ADD_ARGUMENT,
            written="default",
        )
        form = ArgumentForm.KEYWORD if "default" in kwargs else ArgumentForm.ABSENT
        flags = tuple(getattr(action, "option_strings", ()))
        option = Option(dest, getattr(action, "default", None), place, form, flags)
        known = self.by_dest.setdefault(dest, [])
        if option not in known:  # a parser built twice adds the same option again
            known.append(option)


@contextlib.contextmanager
def recording_options(options: Options) -> Iterator[None]:
    """Records into `options` the `add_argument` calls made from its root's files, for a
    block."""
    # Every parser and argument group adds its options through this base class's method.
    container = argparse._ActionsContainer
    original = container.add_argument

    @functools.wraps(original)
    def add_argument(self: Any, *args: Any, **kwargs: Any) -> Any:
        action = original(self, *args, **kwargs)
        with contextlib.suppress(Exception):  # recording never breaks the script's parser
            options.on_add(action, kwargs, sys._getframe(1))
        return action

    container.add_argument = add_argument  # type: ignore[method-assign]
    try:
        yield
    finally:
        container.add_argument = original  # type: ignore[method-assign]


def trace(options: Options, reached: types.FrameType, argument: str, value: Any) -> Option | None:
    """The option whose default became the library's `DataLoader(argument=value)`, or None.

    Args:
        reached: the user's frame whose call led into the library.
    """
    call = call_of(reached)
    if call is None:
        return None
    fits: list[tuple[bool, Option]] = []
    passed = [(None, arg) for arg in call.args] + [(kw.arg, kw.value) for kw in call.keywords]
    for keyword, expression in passed:
        option = _option_passed(options, reached, expression, value)
        if option is not None:
            fits.append((keyword == argument, option))
    named = [option for by_name, option in fits if by_name]
    chosen = named or [option for _, option in fits]
    places = {option.place for option in chosen}
    return chosen[0] if len(places) == 1 else None


def trace_own(
    options: Options, frame: types.FrameType, argument: str, index: int, value: Any
) -> Option | None:
    """The option whose default the user's own `DataLoader(...)` call passes as `argument`
    (`num_workers=args.workers`, or positional at `index`), or None: as `trace`, but only
    the expression written for that very argument counts."""
    call = call_of(frame)
    if call is None:
        return None
    written = [kw.value for kw in call.keywords if kw.arg == argument]
    if not written and index < len(call.args):
        if any(isinstance(arg, ast.Starred) for arg in call.args[: index + 1]):
            return None  # `*args` moves positions
        written = [call.args[index]]
    return _option_passed(options, frame, written[0], value) if written else None


def _option_passed(
    options: Options, frame: types.FrameType, expression: ast.expr, value: Any
) -> Option | None:
    """The option `expression` (`args.workers`) reads, where it holds `value` by default."""
    if not (isinstance(expression, ast.Attribute) and isinstance(expression.value, ast.Name)):
        return None
    name, dest = expression.value.id, expression.attr
    namespace = frame.f_locals.get(name, frame.f_globals.get(name))
    if not isinstance(namespace, argparse.Namespace):
        return None
    found = options.by_dest.get(dest, [])
    if len(found) != 1 or not _same(getattr(namespace, dest, _MISSING), value):
        return None
    option = found[0]
    if not _same(option.default, value) or _given(option, sys.argv[1:]):
        return None
    return option


_MISSING = object()


def _given(option: Option, argv: list[str]) -> bool:
    """Whether the command line may set the option (its default then did not reach the call,
    even where the values agree): a flag written out, `--flag=value`, a short flag with its
    value attached (`-j4`), or a long flag abbreviated (`--work`, which argparse accepts).
    A positional option is always given."""
    if not option.flags:
        return True
    for arg in argv:
        written = arg.split("=", 1)[0]
        for flag in option.flags:
            if written == flag or (len(flag) == 2 and arg.startswith(flag)):
                return True
            if flag.startswith("--") and len(written) > 2 and flag.startswith(written):
                return True
    return False


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b
