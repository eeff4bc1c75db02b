"""`tfperf report`: re-draw an HTML report from a saved profile or a stored study.

Nothing is re-run and TensorFlow is never imported, so a report can be made on a laptop from a
result JSON copied off a training machine, or from a study database shared by many.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from tfperf.cli.base import Command
from tfperf.errors import ResultFileError

if TYPE_CHECKING:
    from tfperf.offload import OffloadResult


class ReportCommand(Command):
    name = "report"
    help = "write the HTML report of a saved profile or offload (JSON) or of a study (--storage)"
    description = (
        "Write a self-contained HTML report without re-running anything and without "
        "TensorFlow: from the JSON that `tfperf profile` saved, or from a study in an Optuna "
        "storage (--storage, --study), the same report `tfperf tune` writes."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "result",
            type=Path,
            nargs="?",
            metavar="RESULT.json",
            help="a profile or offload result, e.g. reports/pipeline-profile.json",
        )
        parser.add_argument(
            "--storage",
            default=None,
            metavar="URL",
            help="the study's storage, as given to `tfperf tune` (sqlite:///studies/p.db, "
            "postgresql://user@host/db, journal:///path)",
        )
        parser.add_argument(
            "--study",
            default=None,
            metavar="NAME",
            help="the study's name (default: the only study in the storage)",
        )
        parser.add_argument(
            "--html",
            type=Path,
            default=None,
            metavar="PATH",
            help="where to write the report (default: reports/<pipeline>-profile.html for a "
            "profile, reports/<study>.html for a study)",
        )

    def run(self, args: argparse.Namespace) -> int:
        from tfperf.report import write_html

        if (args.result is None) == (args.storage is None):
            raise ResultFileError(
                "give either a profile RESULT.json or --storage URL (with --study NAME), "
                "e.g. `tfperf report reports/pipeline-profile.json` or "
                "`tfperf report --storage sqlite:///studies/pipeline.db --study pipeline`."
            )
        if args.result is not None:
            html, default = _profile_report(args.result)
        else:
            html, default = _study_report(args.storage, args.study)
        print(f"HTML report: {write_html(html, args.html or default)}")
        return 0


def _profile_report(path: Path) -> tuple[str, Path]:
    from tfperf.report import default_profile_path, render_offload_html, render_profile_html
    from tfperf.results import ProfileResult

    offload = _offload_result(path)
    if offload is not None:
        stem = Path(offload.pipeline).stem
        return render_offload_html(offload), Path("reports") / f"{stem}-offload.html"
    _refuse_other_json(path)
    result = ProfileResult.load(path)
    return render_profile_html(result), default_profile_path(Path(result.pipeline).stem)


def _study_report(storage: str, study: str | None) -> tuple[str, Path]:
    from tfperf.report import default_study_path, load_snapshot, render_study_html

    snapshot = load_snapshot(storage, study)
    return render_study_html(snapshot), default_study_path(snapshot.study_name)


def _offload_result(path: Path) -> OffloadResult | None:
    """The `tfperf offload` result saved at `path`; None for any other file."""
    from tfperf.offload import OffloadResult

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(data, dict) and "workers_needed" in data and "core_rates" in data:
        return OffloadResult.from_dict(data)
    return None


def _refuse_other_json(path: Path) -> None:
    """A `tfperf tune` summary JSON holds no trials: point at the study it came from; JSON
    that tfperf did not write (no `schema_version`) is named as such, not as an old result."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # ProfileResult.load reports unreadable and invalid files
    if isinstance(data, dict) and "study_name" in data and "storage" in data:
        raise ResultFileError(
            f"{path} is the summary of `tfperf tune`, not a profile; its report is drawn from "
            f"the study itself: tfperf report --storage {data['storage']} "
            f"--study {data['study_name']} (put back the password if the URL needs one)."
        )
    if not isinstance(data, dict) or "schema_version" not in data:
        raise ResultFileError(
            f"{path} is not a tfperf result: it is JSON without the schema_version every "
            "tfperf profile result has. Give the file `tfperf profile --json` wrote (e.g. "
            "reports/pipeline-profile.json), or --storage URL for a study."
        )
