"""What finding and overriding a user's own calls share, whatever the framework.

A framework's recorder (tf.data's `Recorder`, the DataLoader's `LoaderRecorder`) intercepts its
calls while the user's code builds the input. Each keeps the user's folder, the values to pass
instead of the written ones (by site name) and which of them a call took, and refuses an
override that matched no call: `SiteRecorder` is that part, the interception is the framework's.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from tfperf.errors import KnobError
from tfperf.results.discovery import Discovery


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
