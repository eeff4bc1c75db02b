"""The user's files a loaded pipeline reads, and one digest of them all.

One list serves both who must know them: the output check (no output may replace one,
`tfperf.cli._outputs`) and the study, which stores their digest so that trials measured before
and after an edit are never compared as one pipeline (`tfperf.tuner`).
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tfperf.pipeline._loader import PipelineFile


_INSTALLED = ("site-packages", "dist-packages")


def user_sources(pipeline: PipelineFile) -> list[tuple[str, Path]]:
    """The user's files a loaded pipeline reads: itself, its call sites' files, its own modules.

    A module counts when it was imported from the pipeline's folder (installed packages there,
    such as a virtual environment inside a project, do not).
    """
    folder = pipeline.path.resolve().parent
    sources = [("the pipeline file", pipeline.path)]
    if pipeline.discovery is not None:
        for site in pipeline.discovery.sites:
            sources.append((f"a file of {pipeline.path.name}'s", folder / site.file))
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if not file or not file.endswith(".py") or any(part in file for part in _INSTALLED):
            continue
        path = Path(file).resolve()
        if path.is_relative_to(folder):
            sources.append((f"a file of {pipeline.path.name}'s", path))
    return sources


def source_digest(folder: Path, files: Sequence[Path]) -> str:
    """The SHA-256 of `files` (each named relative to `folder`, so the same code checked out
    elsewhere has the same digest); a missing file counts as its own state.

    Example:
        >>> len(source_digest(Path("."), []))  # hex digits of a SHA-256
        64
    """
    digest = hashlib.sha256()
    root = folder.resolve()
    for path in sorted({p.resolve() for p in files}):
        name = path.relative_to(root) if path.is_relative_to(root) else path
        digest.update(f"{name.as_posix()}\0".encode())
        try:
            digest.update(hashlib.sha256(path.read_bytes()).digest())
        except OSError:
            digest.update(b"missing")
    return digest.hexdigest()
