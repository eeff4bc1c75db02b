"""The sentence about the user's files a run changed and tfperf put back (`tfperf.kept`), the
same in the terminal's answer, its `--verbose` summary and the HTML report."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tfperf.measure import display_path

#: The most files a sentence names; the rest are counted.
_NAMED = 3


def kept_words(pipeline: str, put_back: Sequence[str], created: Sequence[str]) -> str:
    """ "Your files: train.py changed model.pt while tfperf ran it; …", or "" when the runs
    of `pipeline` changed and created none (`ProfileResult.files_put_back`, `files_created`;
    a tune's, every trial's together)."""
    sentences = []
    many = len(put_back) > 1
    if put_back:
        sentences.append(
            f"Your files: {Path(pipeline).name} changed {_names(put_back)} while tfperf ran "
            f"it; tfperf put {'them' if many else 'it'} back as "
            f"{'they were' if many else 'it was'}."
        )
    if created:
        head = "It also" if sentences else f"Your files: {Path(pipeline).name}"
        sentences.append(f"{head} created {_names(created)}, written by a run tfperf cut short.")
    return " ".join(sentences)


def _names(paths: Sequence[str]) -> str:
    shown = [display_path(Path(path)) for path in paths[:_NAMED]]
    if len(paths) > _NAMED:
        return f"{', '.join(shown)} and {len(paths) - _NAMED} more"
    if len(shown) > 1:
        return f"{', '.join(shown[:-1])} and {shown[-1]}"
    return shown[0]
