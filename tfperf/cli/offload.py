"""`tfperf offload PIPELINE.py`: how many tf.data service workers feed the model.

Runs in this process: it starts and stops its own children (the pinned measurements, a local
dispatcher and the workers), each stopped on the way out, also on Ctrl-C and SIGTERM. Exit
status 3 (`EXIT_SERVICE`) when the service failed (a worker died, the dispatcher went away, a
port is in use): what was measured before the fault is still written to the JSON and report.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tfperf import frameworks
from tfperf.cli._common_args import add_assignments, add_output_arguments, add_pipeline_argument
from tfperf.cli._outputs import check_outputs, profile_stem
from tfperf.cli.base import (
    Command,
    check_assignments,
    examples_per_second,
    gigabits_per_second,
    port_number,
    positive_float,
    positive_int,
    say,
)
from tfperf.errors import PipelineFileError

__all__ = ["EXIT_SERVICE", "OffloadCommand"]

#: The tf.data service failed: a worker died, the dispatcher is unreachable, a port is in use.
EXIT_SERVICE = 3
DEFAULT_REPORTS_DIR = Path("reports")


class OffloadCommand(Command):
    name = "offload"
    help = "size the tf.data service workers that would feed the model"
    description = (
        "Measure how many tf.data service workers of how many CPU cores feed the model at its "
        "rate: the pipeline up to the cut (after batch) pinned to 1, 2, ... cores, the bytes of "
        "a batch raw and compressed, the trainer's ceiling reading through the service, then a "
        "verify through a real local dispatcher and worker processes on disjoint cores. States "
        "workers_needed, cores_per_worker, per_worker_examples_per_sec and what binds."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_pipeline_argument(parser)
        add_assignments(parser, "--set", "overrides", "override a knob of the file's BASELINE")
        add_output_arguments(
            parser,
            json_default="reports/<pipeline>-offload.json",
            html_default="reports/<pipeline>-offload.html",
        )
        parser.add_argument(
            "--model-examples-per-sec",
            type=examples_per_second,
            default=None,
            metavar="R",
            help="the rate the model consumes, examples/s, e.g. of the accelerator you train "
            "on (default: time the file's model step alone on this host)",
        )
        parser.add_argument(
            "--network-gbps",
            type=gigabits_per_second,
            default=None,
            metavar="G",
            help="bandwidth between the workers and the trainer, Gbit/s (default: unbounded)",
        )
        parser.add_argument(
            "--compression",
            choices=("AUTO", "NONE"),
            default="AUTO",
            help="tf.data service compression for the verify (default: AUTO, snappy)",
        )
        parser.add_argument(
            "--max-cores",
            type=positive_int,
            default=None,
            metavar="C",
            help="pin measurements to at most C cores (default: every core of the host)",
        )
        parser.add_argument(
            "--max-workers",
            type=positive_int,
            default=None,
            metavar="K",
            help="verify with at most K worker processes (default: as the host's cores allow)",
        )
        parser.add_argument(
            "--seconds",
            type=positive_float,
            default=2.0,
            metavar="S",
            help="measured seconds of each rate, after warm-up (default: %(default)s)",
        )
        parser.add_argument(
            "--port",
            type=port_number,
            default=0,
            metavar="P",
            help="the local dispatcher's port (default: 0, any free one)",
        )
        parser.add_argument(
            "--timeout",
            type=positive_float,
            default=60.0,
            metavar="S",
            help="the longest to wait for a process to start or a batch to arrive before "
            "stopping with exit status 3 (default: %(default)s)",
        )

    def run(self, args: argparse.Namespace) -> int:
        from tfperf.offload import OffloadSettings
        from tfperf.pipeline import check_source
        from tfperf.report import render_offload_html, render_offload_text, write_html

        name = profile_stem(Path(args.pipeline), DEFAULT_REPORTS_DIR)
        json_path = args.json or DEFAULT_REPORTS_DIR / f"{name}-offload.json"
        html_path = args.html or DEFAULT_REPORTS_DIR / f"{name}-offload.html"
        check_outputs(
            [("--json", json_path), ("--html", html_path)],
            [("the pipeline file", Path(args.pipeline))],
        )
        check_source(args.pipeline)
        framework = frameworks.detect(args.pipeline)
        service = framework.service()
        if service is None:
            raise PipelineFileError(
                f"{args.pipeline}: the {framework.name} framework has no remote input workers "
                "to size; `tfperf offload` measures tf.data service."
            )
        framework.start(owns_process=True)
        pipeline = framework.load(args.pipeline, getattr(args, "script_args", ()))
        check_assignments(args.overrides, framework.name, shown=str(args.pipeline), option="--set")
        knobs = pipeline.baseline.replace(**dict(args.overrides))
        settings = OffloadSettings(
            seconds=args.seconds,
            warmup_s=min(1.0, args.seconds / 2),
            max_cores=args.max_cores,
            max_workers=args.max_workers,
            model_examples_per_sec=args.model_examples_per_sec,
            network_gbps=args.network_gbps,
            compression=args.compression,
            timeout_s=args.timeout,
            port=args.port,
        )
        result = service.offload(pipeline, knobs, settings, on_status=lambda line: say(line, args))
        saved = result.save(json_path)
        written = write_html(render_offload_html(result), html_path)
        print(render_offload_text(result))
        print(f"\nResult JSON: {saved}\nHTML report: {written}")
        if result.fault:
            print(f"tfperf: error: {result.fault}", file=sys.stderr)
            return EXIT_SERVICE
        return 0
