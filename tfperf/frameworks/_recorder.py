"""What finding and overriding a user's own calls share, whatever the framework.

A framework's recorder (tf.data's `Recorder`, the DataLoader's `LoaderRecorder`) intercepts its
calls while the user's code builds the input. Each keeps the user's folder, the values to pass
instead of the written ones (by site name) and which of them a call took, and refuses an
override that matched no call: `SiteRecorder` is that part, the interception is the framework's.
`call_span` reads where a frame's call is written, `Place` holds it, and `site_at` makes the
`CallSite` there.
"""

from __future__ import annotations

import abc
import dataclasses
import itertools
import os
import types
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from tfperf.errors import KnobError
from tfperf.knobs import SiteName
from tfperf.results.discovery import ArgumentForm, CallSite, Discovery


@dataclasses.dataclass(frozen=True)
class Place:
    """Where in the user's files a call was made: its file below the root, the line of its
    name, its span (columns None when only the line is known).

    `nth` tells apart calls of one method on one line (1, 2, ... in the order they end),
    None when the line holds one.
    """

    file: str
    line: int
    col: int | None = None
    end_line: int | None = None
    end_col: int | None = None
    nth: int | None = None

    def name(self, method: str, argument: str) -> str:
        """The name of the site of `method(argument)` written here."""
        return str(SiteName(method, self.file, self.line, self.nth, argument))


def call_span(frame: types.FrameType) -> tuple[int, int | None, int | None, int | None]:
    """(line, end_line, col, end_col) of the call the frame is making; the line alone < 3.11.

    Columns are 0-based UTF-8 byte offsets, as in `ast`. For a method call spread over lines,
    Python 3.11 starts the span at the method's name, so `line` is the line a person reads as
    the call's.
    """
    code_positions = getattr(frame.f_code, "co_positions", None)
    if code_positions is None:
        return frame.f_lineno, None, None, None
    position = next(itertools.islice(code_positions(), frame.f_lasti // 2, None), None)
    if position is None or position[0] is None:
        return frame.f_lineno, None, None, None
    line, end_line, col, end_col = position
    return line, end_line, col, end_col


def site_at(
    place: Place,
    name: str,
    method: str,
    argument: str,
    *,
    form: ArgumentForm = ArgumentForm.ABSENT,
    index: int | None = None,
    value: int | None = 0,
    calls: int = 0,
) -> CallSite:
    """The site `name` of `method(argument)` written at `place`; by default one with no call
    of its own (`calls` 0, value 0), which tfperf would add: an edit or an inserted call."""
    return CallSite(
        name=name,
        file=place.file,
        line=place.line,
        col=place.col,
        end_line=place.end_line,
        end_col=place.end_col,
        method=method,
        argument=argument,
        form=form,
        index=index,
        value=value,
        calls=calls,
    )


@dataclasses.dataclass
class Seen:
    """One argument of one call site, over every time the call ran: how it is passed, its
    values in the order they came, and the first reason it cannot be tuned."""

    place: Place
    argument: str
    form: ArgumentForm
    index: int | None
    values: list[int | None]
    problem: str | None

    def again(self, value: int | None, problem: str | None) -> None:
        """One more run of the call, passing `value`."""
        if value not in self.values:
            self.values.append(value)
        self.problem = self.problem or problem

    def site(self, name: str, method: str, argument: str, calls: int) -> CallSite:
        """The site `name`, written as `method(argument)` and run `calls` times, with the
        first value passed."""
        return site_at(
            self.place,
            name,
            method,
            argument,
            form=self.form,
            index=self.index,
            value=self.values[0],
            calls=calls,
        )


class SiteRecorder(abc.ABC):
    """The call sites found under `root`, and `overrides` (site name -> value) applied."""

    #: The calls recorded, and while what, in the words of `check_overrides`.
    calls: ClassVar[str] = "call"
    during: ClassVar[str]

    def __init__(self, root: Path, overrides: Mapping[str, int | None]) -> None:
        self.root = Path(os.path.realpath(root))
        self.overrides = dict(overrides)
        self._used: set[str] = set()

    @abc.abstractmethod
    def discovery(self) -> Discovery:
        """The sites (named, in file order) and the untunable calls recorded."""

    def takes(self, name: str) -> bool:
        """Whether an override is given for the site `name`; it then counts as applied."""
        if name not in self.overrides:
            return False
        self._used.add(name)
        return True

    def check_overrides(self, shown: str) -> None:
        """Raises `KnobError` for an override that matched no call, listing the sites found."""
        unused = sorted(set(self.overrides) - self._used)
        if unused:
            found = ", ".join(site.name for site in self.discovery().sites) or "none"
            raise KnobError(
                f"{shown}: no {self.calls} matches {', '.join(map(repr, unused))} while "
                f"{self.during}, so that value cannot be applied. Sites found: {found}. Line "
                "numbers change when the file is edited: run `tfperf profile` for the current "
                "names."
            )

    def _relative(self, filename: str) -> str:
        """`filename` below `root`, as a site names its file."""
        return Path(os.path.realpath(filename)).relative_to(self.root).as_posix()
