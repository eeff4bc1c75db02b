"""The arguments `tfperf profile` and `tfperf tune` share, declared once with one help text,
and read back once: into the trial a profile measures (`trial_request`), and into the check of
`--service` (`check_service`).

Each command passes only what differs: where the flags go (a group or the parser), the defaults
(`profile` measures one configuration longer than a trial does), and what a report is named
after (the pipeline for `profile`, the study for `tune`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from tfperf import frameworks
from tfperf.cli._devices import device_options
from tfperf.cli.base import knob_assignment, non_negative_int, non_negative_seconds, positive_int
from tfperf.errors import PipelineFileError
from tfperf.units import parse_duration

if TYPE_CHECKING:
    from tfperf.knobs import Knobs
    from tfperf.pipeline import PipelineFile
    from tfperf.trials import TrialRequest

_Target = argparse.ArgumentParser | argparse._ArgumentGroup
#: The longest `--service`'s dispatcher may take to accept a connection, in seconds.
SERVICE_CHECK_S = 5.0


def add_pipeline_argument(parser: argparse.ArgumentParser) -> None:
    """The positional `PIPELINE.py`: a pipeline file or a training script."""
    parser.add_argument(
        "pipeline",
        type=Path,
        metavar="PIPELINE.py",
        help="a pipeline file defining make_dataset(knobs) (or make_dataset()) and "
        "make_model or make_train_step, or a training script (model.fit or its own loop); see the "
        "README and docs/zero-change.md",
    )


def add_measurement_arguments(target: _Target, *, steps: int, min_seconds: float) -> None:
    """`--steps`, `--min-seconds`, `--epoch-steps` and `--warmup`: how long each phase runs."""
    target.add_argument(
        "--steps",
        type=positive_int,
        default=steps,
        metavar="N",
        help="measured steps per phase after warm-up (default: %(default)s), at least ten "
        "times the batches the pipeline's prefetch buffers hold; finite datasets are "
        "restarted as needed",
    )
    target.add_argument(
        "--min-seconds",
        type=non_negative_seconds,
        default=min_seconds,
        metavar="S",
        help="each phase measures at least this long, taking more steps when --steps run "
        "faster (default: %(default)s; 0: exactly the steps)",
    )
    target.add_argument(
        "--epoch-steps",
        type=positive_int,
        default=None,
        metavar="N",
        help="steps (batches) in one epoch of the real data, to weigh what each restart "
        "of a finite dataset costs (default: the dataset's cardinality, else one pass of "
        "the profiled data)",
    )
    target.add_argument(
        "--warmup",
        type=non_negative_int,
        default=None,
        metavar="N",
        help="warm-up steps excluded at the start of each phase (default: detected "
        "automatically, once step times settle)",
    )


def add_assignments(target: _Target, flag: str, dest: str, words: str) -> None:
    """A repeatable `FLAG NAME=VALUE` (`--set`, `--fix`): a knob or a call site and its value,
    each pair appended to `dest`; `words` is the help, less "(repeatable)"."""
    target.add_argument(
        flag,
        dest=dest,
        type=knob_assignment,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help=f"{words} (repeatable)",
    )


def add_output_arguments(target: _Target, *, json_default: str, html_default: str) -> None:
    """`--json`, `--html` and `--quiet`; the defaults name the files written when not given."""
    target.add_argument(
        "--json",
        type=Path,
        default=None,
        metavar="PATH",
        help=f"where to write the result JSON (default: {json_default})",
    )
    target.add_argument(
        "--html",
        type=Path,
        default=None,
        metavar="PATH",
        help=f"where to write the HTML report (default: {html_default})",
    )
    target.add_argument("--quiet", action="store_true", help="no progress bars, only the summary")


def add_step_time_argument(target: _Target) -> None:
    """`--step-time DURATION`: emulate the accelerator's step by a sleep of that length."""
    target.add_argument(
        "--step-time",
        type=duration,
        default=None,
        metavar="DURATION",
        help="emulate the accelerator: each training step sleeps this long (e.g. 5ms, 0.02s) "
        "instead of running the model, as DLIO and MLPerf Storage measure input; the file "
        "then needs only make_dataset. Reports the accelerator's utilisation against "
        "MLPerf Storage's 90%% bar and the shortest step the input keeps that busy",
    )


def duration(text: str) -> float:
    """Seconds in a duration argument ("5ms", "0.02s", "20 ms"); argparse names the flag."""
    try:
        return parse_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def service_address(text: str) -> str:
    """argparse type for `--service`: `grpc://HOST:PORT` (or `HOST:PORT`), as `grpc://...`."""
    address = text.strip().removeprefix("grpc://")
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(
            f"expected a tf.data service dispatcher as grpc://HOST:PORT, e.g. "
            f"grpc://localhost:5050 or grpc://[::1]:5050, but got {text!r}"
        )
    if ":" in host and not (host.startswith("[") and host.endswith("]")):
        # Without brackets the port cannot be told from the address's last group.
        raise argparse.ArgumentTypeError(
            f"an IPv6 host goes in brackets, e.g. grpc://[{host}]:{port}, but got {text!r}"
        )
    return f"grpc://{address}"


def add_service_argument(target: _Target) -> None:
    """`--service grpc://HOST:PORT`: measure through a tf.data service cluster."""
    target.add_argument(
        "--service",
        type=service_address,
        default=None,
        metavar="grpc://HOST:PORT",
        help="read the input through the tf.data service cluster whose dispatcher is at this "
        "address: tfperf inserts distribute() after the pipeline's last stage before prefetch "
        "and keeps a local prefetch after it (see docs/offload.md). The stage analysis is off: "
        "the stages run on the workers",
    )


def check_service(args: argparse.Namespace, pipeline: PipelineFile, knobs: Knobs) -> None:
    """Refuses `--service` where the file's framework has no tf.data service, or where its
    dispatcher does not accept `knobs`' pipeline within `SERVICE_CHECK_S` (`ServiceError`)."""
    framework = frameworks.detect(pipeline.path)
    service = framework.service()
    if service is None:
        raise PipelineFileError(f"--service: the {framework.name} framework has no tf.data service")
    service.check(pipeline, knobs, args.service.removeprefix("grpc://"), SERVICE_CHECK_S)


def budget_s(args: argparse.Namespace) -> float | None:
    """`--budget` in seconds; None where it is 0 or the command has none."""
    return getattr(args, "budget", None) or None


def trial_request(
    args: argparse.Namespace, knobs: Knobs, pipeline: PipelineFile | None = None
) -> TrialRequest:
    """The measurement of `knobs` that the flags of `tfperf profile` ask for, as one record:
    the child's (`tfperf.trials.run_trial`), or this process's under `--debug`."""
    from tfperf.trials import TrialRequest

    layout, strategy = device_options(args, pipeline)
    return TrialRequest(
        pipeline=args.pipeline,
        knobs=knobs,
        argv=tuple(getattr(args, "script_args", ())),
        layout=layout,
        steps=args.steps,
        min_seconds=args.min_seconds,
        warmup=args.warmup,
        analyse_stages=not getattr(args, "no_stages", False),
        epoch_steps=args.epoch_steps,
        strategy=strategy,
        budget_s=budget_s(args),
        step_time_s=getattr(args, "step_time", None),
    )
