"""What a run must never write over: its inputs, checked against its outputs before measuring.

The pipeline file and the study storage are known from the command line, so they are checked
first; the user's other files (the modules a script imports from its folder, the files holding
its call sites) are known once the file is loaded, and are checked then, still before anything
is measured.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from tfperf.errors import OutputPathError
from tfperf.outputs import check_output_path, check_separate, rescue_path, safe_stem, same_file
from tfperf.pipeline import PipelineFile, user_sources

#: (option or words, path) of each output a run writes.
Outputs = Sequence[tuple[str, Path]]


def check_outputs(outputs: Outputs, inputs: Sequence[tuple[str, Path]]) -> None:
    """Refuses, before anything runs, an output that cannot be written or would replace a file.

    Raises:
        OutputPathError: see `tfperf.outputs.check_output_path` and `check_separate`.
    """
    for option, path in outputs:
        check_output_path(path, option)
    check_separate(outputs, inputs)


def check_loaded(outputs: Outputs, pipeline: PipelineFile) -> None:
    """Refuses an output that is one of the loaded pipeline's files (`user_sources`).

    Raises:
        OutputPathError: see `tfperf.outputs.check_separate`.
    """
    check_separate(outputs, user_sources(pipeline))


def save_or_rescue(save: Callable[[Path], Path], path: Path, what: str) -> tuple[Path, bool]:
    """`save(path)`; where `path` fails now, `save` into the temporary folder instead, saying so
    on stderr ("... `what` was saved to ..."). Returns where it went and whether it was there."""
    try:
        return save(path), False
    except OutputPathError as error:
        rescued = save(rescue_path(path.name))
        print(f"tfperf: error: {error} {what} was saved to {rescued}.", file=sys.stderr)
        return rescued, True


def profile_stem(pipeline: Path, reports_dir: Path) -> str:
    """The stem of a profile's default report names, never one another pipeline's reports hold.

    The pipeline's own stem (`pipeline` -> `reports/pipeline-profile.json`) while that report is
    free or this pipeline's; when another file of the same name wrote it (two examples both
    named `pipeline.py`), the folder joins the stem (`quickstart-pipeline`), and failing that a
    digest of the absolute path does. Which pipeline wrote a report is read from its JSON.
    """
    stem = safe_stem(pipeline.stem)
    absolute = pipeline.resolve()
    digest = hashlib.sha256(str(absolute).encode()).hexdigest()[:8]
    candidates = (stem, safe_stem(f"{absolute.parent.name}-{stem}"), f"{stem}-{digest}")
    for candidate in candidates:
        owner = _profiled_pipeline(reports_dir / f"{candidate}-profile.json")
        if owner is None or same_file(owner, absolute):
            return candidate
    return candidates[-1]


def _profiled_pipeline(report: Path) -> Path | None:
    """The pipeline a profile JSON was written for, None when there is none or it says none."""
    try:
        recorded = json.loads(report.read_text(encoding="utf-8")).get("pipeline")
    except (OSError, ValueError, AttributeError):
        return None
    return Path(recorded) if isinstance(recorded, str) and recorded else None
