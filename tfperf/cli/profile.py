"""`tfperf profile PIPELINE.py`: measure one configuration and say where the time goes.

PIPELINE.py may be a pipeline file (`make_dataset(knobs)` or a plain `make_dataset()`) or a
training script (`model.fit` or its own loop); arguments after `--` go to the script or file.
The file is loaded here first (a broken file fails at once), then measured in a child process,
as tune's trials are (`tfperf.trials.run_trial`), so Ctrl-C, SIGTERM and `--timeout` end it
whatever the pipeline is doing; `--debug` measures in this process instead, for whole tracebacks.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from tfperf import frameworks
from tfperf.cli._common_args import (
    add_assignments,
    add_measurement_arguments,
    add_output_arguments,
    add_pipeline_argument,
    add_service_argument,
    add_step_time_argument,
    budget_s,
    check_service,
    trial_request,
)
from tfperf.cli._devices import (
    add_device_arguments,
    check_device_flags,
    device_options,
    gpu_memory_fixes,
)
from tfperf.cli._outputs import Outputs, check_loaded, check_outputs, profile_stem, save_or_rescue
from tfperf.cli._scaling import add_scaling_argument, with_scaling
from tfperf.cli._stall import DEFAULT_STALL_S, add_stall_argument, stall_limit, stall_message
from tfperf.cli.base import (
    Command,
    check_assignments,
    non_negative_seconds,
    positive_float,
    say,
    speedup_factor,
)
from tfperf.cli.progress import ProgressDisplay
from tfperf.errors import FlagError, PipelineFileError, PipelineRuntimeError
from tfperf.measure import Budget
from tfperf.results import TrialStatus
from tfperf.results.discovery import Discovery, describe_discovery

if TYPE_CHECKING:
    from tfperf.knobs import Knobs
    from tfperf.measure import Progress
    from tfperf.pipeline import PipelineFile
    from tfperf.results import ProfileResult
    from tfperf.trials import TrialRequest

EXIT_FAILED = 1

DEFAULT_REPORTS_DIR = Path("reports")
#: `--stall-timeout`'s default under `--service`, in seconds.
SERVICE_STALL_S = 120.0


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
        add_pipeline_argument(parser)
        add_measurement_arguments(parser, steps=100, min_seconds=1.0)
        add_assignments(
            parser,
            "--set",
            "overrides",
            "override a knob of the file's BASELINE, e.g. --set batch_size=128 or "
            "--set num_parallel_calls=AUTOTUNE, or a call site of a plain file or script, "
            "e.g. --set map@train.py:23.num_parallel_calls=8",
        )
        add_output_arguments(
            parser,
            json_default="reports/<pipeline>-profile.json",
            html_default="reports/<pipeline>-profile.html",
        )
        parser.add_argument(
            "--no-stages",
            action="store_true",
            help="skip the stage analysis (each stage of the pipeline run alone for ~0.7 s "
            "to name the one that limits throughput)",
        )
        parser.add_argument(
            "--timeout",
            type=positive_float,
            default=None,
            metavar="S",
            help="stop the measurement after S seconds and say which phase was running "
            "(default: no limit). The measurement runs in a child process, so Ctrl-C or the "
            "timeout ends it at once whatever the pipeline is doing",
        )
        parser.add_argument(
            "--budget",
            type=budget_seconds,
            default=Budget().seconds,
            metavar="S",
            help=f"the time the measurement may take, e.g. 300 or 5m (default: "
            f"{Budget().seconds:g}s; 0: none). Each phase ends after a quarter of it and the "
            "stage analysis after a fifth, with the steps measured by then, so slow steps "
            "are measured over fewer of them; start-up comes on top",
        )
        add_stall_argument(parser)
        add_device_arguments(parser)
        add_scaling_argument(parser)
        accelerator = parser.add_mutually_exclusive_group()
        add_step_time_argument(accelerator)
        accelerator.add_argument(
            "--accelerator-speedup",
            type=speedup_factor,
            default=None,
            metavar="K",
            help="predict the input wait and the accelerator's utilisation for a step K times "
            "faster than the model's measured one (e.g. 8 for a GPU eight times faster than "
            "this CPU), from the pipeline-only rate",
        )
        add_service_argument(parser)
        parser.add_argument(
            "--verbose",
            action="store_true",
            help="print every figure and every finding (default: the verdict, the rates, the "
            "limit and the three weightiest findings; the HTML report holds everything)",
        )

    def run(self, args: argparse.Namespace) -> int:
        from tfperf.pipeline import check_source, load_pipeline

        _check_step_budget(args)
        outputs = _check_outputs(args)
        (_, json_path), (_, html_path) = outputs
        check_source(args.pipeline)  # a broken file fails before TensorFlow loads
        framework = frameworks.detect(args.pipeline)
        # Measured in this process (--debug), its devices are laid out before anything
        # touches one; else the child lays them out.
        framework.start(device_options(args)[0] if args.debug else None)
        # Loaded here too, not only in the child: a broken file fails in a second, with the
        # same message, before a measurement starts.
        pipeline = load_pipeline(
            args.pipeline, getattr(args, "script_args", ()), needs_step=args.step_time is None
        )
        if (announced := framework.announce(pipeline)) is not None:
            say(announced, args)
        check_loaded(outputs, pipeline)
        check_assignments(
            args.overrides, pipeline.framework, shown=str(args.pipeline), option="--set"
        )
        knobs = pipeline.baseline.replace(**dict(args.overrides))
        knobs = _check_devices(args, pipeline, knobs)
        knobs = _through_service(args, pipeline, knobs)
        say(f"Profiling {args.pipeline} ({_window_words(args)})...", args)
        found: list[Discovery] = []
        waiting = Path(args.pipeline).name
        with ProgressDisplay(enabled=not args.quiet, waiting=waiting) as progress:
            if args.debug:  # in this process, so that a failure shows its whole traceback
                request = trial_request(args, knobs, pipeline)
                result = _profile_here(pipeline, request, progress, found)
            else:
                result = _measured(args, knobs, progress, found, pipeline)
        result = with_utilisation(result, args)
        saved = _save(result, json_path, html_path)  # first: a Ctrl-C in --scaling keeps it
        result, (saved_json, saved_html, failed) = _scaled(result, saved, args, pipeline, knobs)
        print(_rendered(result, args))
        if found:
            print("\n" + "\n".join(_sites_lines(found[0], args)))
            if found[0].sites:
                print(f"`tfperf tune {args.pipeline}` searches these values and writes the patch.")
        print(f"\nResult JSON: {saved_json}\nHTML report: {saved_html}")
        return EXIT_FAILED if failed else 0


#: The fewest emulated steps a phase runs however short its budget: the warm-up's three and
#: the five measured steps a phase the budget ends still takes (`tfperf.measure`'s
#: `MIN_BUDGET_STEPS`): a figure needs some.
MIN_PHASE_STEPS = 8


def _check_step_budget(args: argparse.Namespace) -> None:
    """Refuses a `--step-time` whose fewest steps overrun the share of `--budget` a phase may
    take: the budget would not bound the run, which would take hours where minutes were
    asked for.

    Raises:
        FlagError: naming both flags, the time the steps take and the fixes.
    """
    phase_s = Budget(budget_s(args)).phase_s
    if args.step_time is None or phase_s is None:
        return
    needed = MIN_PHASE_STEPS * args.step_time
    if needed <= phase_s:
        return
    budget = budget_s(args) or 0.0
    raise FlagError(
        f"--step-time {_seconds(args.step_time)} does not fit --budget {budget:g}s: each "
        f"of the three phases runs at least {MIN_PHASE_STEPS} steps ({MIN_PHASE_STEPS} x "
        f"{_seconds(args.step_time)} = {_seconds(needed)}) and may take a quarter "
        f"of the budget ({_seconds(phase_s)}). Give --budget {4 * needed:.0f} or more, a "
        f"--step-time of {_seconds(phase_s / MIN_PHASE_STEPS)} or less, or --budget 0 "
        "for no budget."
    )


def _seconds(seconds: float) -> str:
    """A duration for a message: "5 ms", "3.75 s", "28,800 s" (never in exponent form)."""
    from tfperf.units import format_seconds

    return f"{seconds:,.0f} s" if seconds >= 100 else format_seconds(seconds)


def _check_outputs(args: argparse.Namespace) -> Outputs:
    """Both output paths, refused before measuring if they cannot be written or would replace
    the pipeline file or each other."""
    from tfperf.report import default_profile_path

    name = profile_stem(Path(args.pipeline), DEFAULT_REPORTS_DIR)
    outputs = [
        (
            "--json" if args.json else "the result JSON",
            args.json or DEFAULT_REPORTS_DIR / f"{name}-profile.json",
        ),
        ("--html" if args.html else "the HTML report", args.html or default_profile_path(name)),
    ]
    check_outputs(outputs, [("the pipeline file", Path(args.pipeline))])
    return outputs


def _check_devices(args: argparse.Namespace, pipeline: PipelineFile, knobs: Knobs) -> Knobs:
    """`knobs` as the device flags set them, after refusing replicas the batch cannot feed and
    saying which flags this machine ignores."""
    has_gpu = check_device_flags(args, pipeline, knobs)
    return knobs.replace(**gpu_memory_fixes(args, has_gpu=has_gpu))


def _through_service(args: argparse.Namespace, pipeline: PipelineFile, knobs: Knobs) -> Knobs:
    """With `--service`: the knobs that read through it, once its dispatcher answers and every
    stage can run on a worker (else one message, before anything is measured)."""
    if args.service is None:
        return knobs
    # The JSON's knobs then name both where and how the input was read.
    mode = knobs.service_processing_mode or "parallel_epochs"
    knobs = knobs.replace(service=args.service, service_processing_mode=mode)
    check_service(args, pipeline, knobs)
    args.no_stages = True  # the stages run on the workers, out of this host's sight
    if getattr(args, "stall_timeout", None) == DEFAULT_STALL_S:
        # A read from a cluster that stopped answering blocks inside TensorFlow: stop it
        # sooner than a slow pipeline's default allows, then say whether the dispatcher left.
        args.stall_timeout = SERVICE_STALL_S
    return knobs


def _measured(
    args: argparse.Namespace,
    knobs: Knobs,
    progress: ProgressDisplay,
    found: list[Discovery],
    pipeline: PipelineFile,
) -> ProfileResult:
    """`profile_in_child`; a failure through `--service` whose dispatcher no longer answers is
    a `ServiceError` saying so (exit status 3)."""
    try:
        return profile_in_child(args, knobs, progress, found, pipeline)
    except PipelineRuntimeError as error:
        if args.service is None:
            raise
        from tfperf.errors import ServiceError

        try:
            check_service(args, pipeline, knobs)
        except ServiceError as gone:
            raise ServiceError(
                f"the tf.data service dispatcher at {args.service.removeprefix('grpc://')} went "
                f"away during the measurement: {gone}"
            ) from error
        raise


def _profile_here(
    pipeline: PipelineFile,
    request: TrialRequest,
    progress: ProgressDisplay,
    found: list[Discovery],
) -> ProfileResult:
    asked = frameworks.ProfileRequest(
        **request.options(), owns_process=True, progress=progress, on_discovery=found.append
    )
    return frameworks.detect(pipeline.path).profile(pipeline, request.knobs, asked)


def with_utilisation(result: ProfileResult, args: argparse.Namespace) -> ProfileResult:
    """`result` with the accelerator's utilisation when `--step-time` or
    `--accelerator-speedup` asked for it; as it is otherwise."""
    from tfperf.results import Utilisation

    if args.step_time is None and args.accelerator_speedup is None:
        return result
    result.utilisation = Utilisation.of(result, args.accelerator_speedup)
    return result


def profile_in_child(
    args: argparse.Namespace,
    knobs: Knobs,
    progress: ProgressDisplay,
    found: list[Discovery],
    pipeline: PipelineFile | None = None,
) -> ProfileResult:
    """Measures in `python -m tfperf.trials._worker`, which Ctrl-C and `--timeout` end at once.

    Raises:
        PipelineFileError: the child found the file or the knobs broken.
        PipelineRuntimeError: the pipeline failed, crashed, ran past `--timeout` or made no
            progress for `--stall-timeout`.
    """
    from tfperf.trials import Budgets, run_trial, stall_reason

    last: list[Progress] = []

    def on_progress(report: Progress) -> None:
        last[:] = [report]
        progress(report)

    request = trial_request(args, knobs, pipeline)
    stall_s = stall_limit(args)
    outcome = run_trial(
        request,
        Budgets(timeout_s=args.timeout, stall_s=stall_s),
        on_progress=on_progress,
        on_discovery=found.append,
    )
    if outcome.status is TrialStatus.COMPLETE and outcome.result is not None:
        return outcome.result
    if outcome.status is TrialStatus.FATAL:
        raise PipelineFileError(outcome.reason)
    if (
        outcome.status is TrialStatus.TIMEOUT
        and stall_s
        and outcome.reason == stall_reason(stall_s)
    ):
        raise PipelineRuntimeError(
            stall_message(args.pipeline, stall_s, last[0] if last else None, _input_words(args))
        )
    if outcome.status is TrialStatus.TIMEOUT:
        raise PipelineRuntimeError(_timeout_message(args, last[0] if last else None))
    if outcome.status is TrialStatus.FAILED:
        raise PipelineRuntimeError(outcome.reason)
    raise PipelineRuntimeError(f"{Path(args.pipeline).name}: the measurement {outcome.reason}")


def _input_words(args: argparse.Namespace) -> tuple[str, str]:
    """The call that builds the file's input and its first work per element, in its
    framework's words: `make_dataset()` and a map for tf.data, `make_loader()` and an item
    for a DataLoader."""
    framework = frameworks.detect(args.pipeline)
    return f"{framework.input_function}()", framework.words.first_work


def _timeout_message(args: argparse.Namespace, last: Progress | None) -> str:
    name = Path(args.pipeline).name
    call, first = _input_words(args)
    if last is None:
        where = (
            "no batch ever arrived: the pipeline is stuck before its first element (in "
            f"{call} or its first {first}), or the model build is"
        )
    else:
        phase = last.phase.value.replace("_", " ")
        stage = "warming up" if last.warming_up else f"{last.measured_steps} measured steps in"
        where = f"it was in the {phase} phase ({stage}) and its next batch did not come"
    return (
        f"{name}: stopped after {args.timeout:g} s (--timeout): {where}. Run the file's "
        f"{call} alone to see where it blocks, or raise --timeout."
    )


def _scaled(
    result: ProfileResult,
    saved: tuple[Path, Path, bool],
    args: argparse.Namespace,
    pipeline: PipelineFile,
    knobs: Knobs,
) -> tuple[ProfileResult, tuple[Path, Path, bool]]:
    """`result` with the `--scaling` curve, saved again over the files the profile was saved
    to before the scaling runs started; without the flag, both as they are.

    A Ctrl-C (or SIGTERM) during the scaling runs prints the profile already measured and
    names its files, then ends the run as interrupted.
    """
    if args.scaling is None:
        return result, saved
    saved_json, saved_html, failed = saved
    say(
        f"Profile saved to {saved_json} and {saved_html}; the scaling runs now and is added "
        "to both when it ends.",
        args,
    )
    try:
        with ProgressDisplay(enabled=not args.quiet) as progress:
            scaled = with_scaling(result, args, pipeline, knobs, progress)
    except KeyboardInterrupt:
        print(_rendered(result, args))
        print(f"\nResult JSON: {saved_json}\nHTML report: {saved_html}\n(without the scaling)")
        raise
    again_json, again_html, failed_again = _save(scaled, saved_json, saved_html)
    return scaled, (again_json, again_html, failed or failed_again)


def _rendered(result: ProfileResult, args: argparse.Namespace) -> str:
    """The short answer, or with --verbose every figure and finding."""
    from tfperf.report import render_answer, render_summary

    return render_summary(result) if args.verbose else render_answer(result)


def _sites_lines(discovery: Discovery, args: argparse.Namespace) -> list[str]:
    """Every call site with --verbose; else one line that counts them."""
    if args.verbose:
        return describe_discovery(discovery)
    if not discovery.sites:
        return describe_discovery(discovery)[:1]
    names = ", ".join(site.name for site in discovery.sites[:3])
    more = f" and {len(discovery.sites) - 3} more" if len(discovery.sites) > 3 else ""
    untunable = len(discovery.untunable)
    return [
        f"Call sites: {len(discovery.sites)} tunable ({names}{more})"
        + (f", {untunable} not tunable here" if untunable else "")
        + "; --verbose lists them."
    ]


def _save(result: ProfileResult, json_path: Path, html_path: Path) -> tuple[Path, Path, bool]:
    """Writes the JSON and the report; a path that fails now is replaced by a temporary file."""
    from tfperf.report import render_profile_html, write_html

    saved_json, json_failed = save_or_rescue(result.save, json_path, "The result")
    html = render_profile_html(result)
    saved_html, html_failed = save_or_rescue(
        lambda to: write_html(html, to), html_path, "The report"
    )
    return saved_json, saved_html, json_failed or html_failed


def _window_words(args: argparse.Namespace) -> str:
    steps = f"{args.steps} measured steps"
    if args.min_seconds > 0:
        steps = f"{steps}, at least {args.min_seconds:g} s,"
    budget = budget_s(args)
    if budget:
        steps = f"{steps} per phase, within a budget of {budget:g} s (--budget)"
    return steps


def budget_seconds(text: str) -> float:
    """argparse type for `--budget`: seconds, with an optional `s` or `m` unit; 0 is none."""
    factor = 60.0 if text.endswith("m") else 1.0
    return factor * non_negative_seconds(text.rstrip("sm") or text)
