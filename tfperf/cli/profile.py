"""`tfperf profile PIPELINE.py`: measure one configuration and say where the time goes.

PIPELINE.py may be a pipeline file (`make_dataset(knobs)` or a plain `make_dataset()`) or a
training script that calls `model.fit`; arguments after `--` go to the script or file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tfperf._tf import import_tensorflow_quietly
from tfperf.cli.base import Command, knob_assignment, non_negative_int, positive_int
from tfperf.cli.progress import ProgressDisplay
from tfperf.results import Discovery, describe_discovery

DEFAULT_REPORTS_DIR = Path("reports")


class ProfileCommand(Command):
    name = "profile"
    help = "measure where a pipeline's training time goes (input wait vs compute)"
    description = (
        "Measure one configuration of a pipeline file three ways: end to end (per step, the "
        "time waiting for the next batch and the time computing), the pipeline alone, and the "
        "model alone on one cached batch (the ceiling if input were free). Prints a verdict on "
        "TensorBoard's scale, the throughputs, memory and advice, and writes the result as JSON. "
        "PIPELINE.py may also be a plain file whose make_dataset() takes no knobs, or a "
        "training script that calls model.fit: tfperf runs it up to fit and measures its model "
        "and dataset there, and lists the tf.data call sites it can tune. Arguments after `--` "
        "go to the file: tfperf profile train.py -- --epochs 3"
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "pipeline",
            type=Path,
            metavar="PIPELINE.py",
            help="a pipeline file defining make_dataset(knobs) (or make_dataset()) and "
            "make_model or make_train_step, or a training script calling model.fit; see the "
            "README and docs/zero-change.md",
        )
        parser.add_argument(
            "--steps",
            type=positive_int,
            default=100,
            metavar="N",
            help="measured steps per phase after warm-up (default: %(default)s); finite "
            "datasets are restarted as needed",
        )
        parser.add_argument(
            "--warmup",
            type=non_negative_int,
            default=None,
            metavar="N",
            help="warm-up steps excluded at the start of each phase (default: detected "
            "automatically, once step times settle)",
        )
        parser.add_argument(
            "--set",
            dest="overrides",
            type=knob_assignment,
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="override a knob of the file's BASELINE, e.g. --set batch_size=128 or "
            "--set num_parallel_calls=AUTOTUNE, or a call site of a plain file or script, "
            "e.g. --set map@train.py:23.num_parallel_calls=8 (repeatable)",
        )
        parser.add_argument(
            "--json",
            type=Path,
            default=None,
            metavar="PATH",
            help="where to write the result JSON (default: reports/<pipeline>-profile.json)",
        )
        parser.add_argument(
            "--html",
            type=Path,
            default=None,
            metavar="PATH",
            help="where to write the HTML report (default: reports/<pipeline>-profile.html)",
        )
        parser.add_argument(
            "--no-stages",
            action="store_true",
            help="skip the stage analysis (each stage of the pipeline run alone for ~0.7 s "
            "to name the one that limits throughput)",
        )
        parser.add_argument(
            "--quiet", action="store_true", help="no progress bars, only the summary"
        )

    def run(self, args: argparse.Namespace) -> int:
        from tfperf.pipeline import load_pipeline
        from tfperf.report import (
            default_profile_path,
            render_profile_html,
            render_summary,
            write_html,
        )

        if not args.debug:
            import_tensorflow_quietly()
        pipeline = load_pipeline(args.pipeline, getattr(args, "script_args", ()))
        knobs = pipeline.baseline.replace(**dict(args.overrides))
        _status(f"Profiling {args.pipeline} ({args.steps} measured steps per phase)...", args)
        from tfperf.measure import profile_pipeline

        found: list[Discovery] = []
        with ProgressDisplay(enabled=not args.quiet) as progress:
            result = profile_pipeline(
                pipeline,
                knobs,
                steps=args.steps,
                warmup=args.warmup,
                owns_process=True,
                progress=progress,
                analyse_stages=not args.no_stages,
                on_discovery=found.append,
            )
        json_path = args.json or DEFAULT_REPORTS_DIR / f"{pipeline.name}-profile.json"
        result.save(json_path)
        html_path = write_html(
            render_profile_html(result), args.html or default_profile_path(pipeline.name)
        )
        print(render_summary(result))
        if found:
            print("\n" + "\n".join(describe_discovery(found[0])))
            print(f"`tfperf tune {args.pipeline}` searches these values and writes the patch.")
        print(f"\nResult JSON: {json_path}\nHTML report: {html_path}")
        return 0


def _status(message: str, args: argparse.Namespace) -> None:
    if not args.quiet:
        print(message, file=sys.stderr, flush=True)
