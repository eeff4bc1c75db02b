"""The progress display: until the first step reports, one line says what the run waits for."""

from __future__ import annotations

from typing import Any

import pytest

from tfperf.cli.progress import ProgressDisplay, waiting_words
from tfperf.measure import Progress
from tfperf.results import Phase


class _Line:
    """A stand-in for tqdm that records what it was asked to draw."""

    made: list[_Line] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.descriptions: list[str] = []
        self.closed = False
        self.n = 0
        _Line.made.append(self)

    def set_description_str(self, text: str) -> None:
        self.descriptions.append(text)

    def update(self, steps: int) -> None:
        self.n += steps

    def close(self) -> None:
        self.closed = True


def test_the_waiting_line_names_the_file_until_the_first_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tqdm

    _Line.made = []
    monkeypatch.setattr(tqdm, "tqdm", _Line)
    with ProgressDisplay(enabled=True, waiting="train.py") as display:
        display(Progress(Phase.END_TO_END, True, 0, None))
        waiting, bar = _Line.made  # the waiting line is gone before the phase's bar comes
        assert waiting.closed and not bar.closed
        assert waiting.descriptions[0].startswith("waiting for train.py to reach its first batch (")
        display(Progress(Phase.END_TO_END, True, 0, None))
    assert len(_Line.made) == 2  # once only
    assert waiting_words("train.py", 12.4) == (
        "waiting for train.py to reach its first batch (12 s)"
    )


def test_no_waiting_line_when_quiet_or_not_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    import tqdm

    _Line.made = []
    monkeypatch.setattr(tqdm, "tqdm", _Line)
    with ProgressDisplay(enabled=False, waiting="train.py"):
        pass
    with ProgressDisplay(enabled=True):
        pass
    assert _Line.made == []
