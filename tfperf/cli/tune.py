"""`tfperf tune PIPELINE.py`: search for the fastest configuration, and prove it."""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfperf import frameworks
from tfperf.cli._common_args import (
    add_assignments,
    add_measurement_arguments,
    add_output_arguments,
    add_pipeline_argument,
    add_service_argument,
    add_step_time_argument,
    check_service,
    duration,
)
from tfperf.cli._devices import (
    add_device_arguments,
    check_device_flags,
    device_options,
    gpu_memory_fixes,
)
from tfperf.cli._outputs import check_loaded, check_outputs, save_or_rescue
from tfperf.cli._tune_progress import NothingCompleted, TuneProgress
from tfperf.cli.base import (
    Command,
    byte_size,
    check_assignments,
    positive_float,
    positive_int,
    say,
)
from tfperf.cli.lifecycle import interrupted_status
from tfperf.errors import OutputPathError, TfperfError
from tfperf.outputs import safe_stem
from tfperf.results.tune import Objective
from tfperf.trials import forked_trials
from tfperf.tuner import TuneOptions

if TYPE_CHECKING:
    from collections.abc import Sequence

    from tfperf.pipeline import PipelineFile
    from tfperf.results.tune import TuneResult
    from tfperf.tuner import Tuner

DEFAULT_REPORTS_DIR = Path("reports")
#: `--write-patch` given without a path: the patch goes next to the study's reports.
_STUDY_PATCH = Path("<study>.patch")


class TuneCommand(Command):
    name = "tune"
    help = "search for the fastest configuration of a pipeline (an Optuna study)"
    description = (
        "Search the knobs of a pipeline file (parallelism, interleave, shuffle buffer, batch "
        "size, prefetch, precision, tf.data options) for the most examples per second. The "
        "first trials are the file's BASELINE and an everything-AUTOTUNE configuration; each "
        "trial runs in its own process under RAM, GPU-memory and time budgets; at the end the "
        "best candidates and both references are re-measured side by side and compared by "
        "median. Trials run ONE AT A TIME on a machine: parallel trials on the same cores "
        "would corrupt each other's timings. To go faster, run this same command on several "
        "machines with one shared --storage. Running the command again resumes the study. "
        "PIPELINE.py may also be a plain file whose make_dataset() takes no knobs, or a "
        "training script (model.fit or its own loop): tfperf then tunes the values written in its "
        "tf.data calls and gives the result as a patch. Arguments after `--` go to the file: "
        "tfperf tune train.py -- --epochs 3"
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_pipeline_argument(parser)
        search = parser.add_argument_group("search")
        search.add_argument(
            "--trials",
            type=positive_int,
            default=None,
            metavar="N",
            help="finish when the study holds N finished trials, this run's and earlier runs' "
            f"(default: {default('trials')} when neither --timeout nor --time-limit is given)",
        )
        search.add_argument(
            "--timeout",
            type=positive_float,
            default=None,
            metavar="S",
            help="stop starting trials after S seconds (re-measurement still runs)",
        )
        search.add_argument(
            "--time-limit",
            type=duration,
            default=None,
            metavar="DURATION",
            help="finish within about this long (e.g. 5m, 300s), re-measurement included: the "
            "search stops when the next trial and the least re-measurement after it would "
            "not fit, and the answer is still re-measured beside the references and "
            "confirmed. Without --trials, the search runs until then",
        )
        add_assignments(
            search,
            "--fix",
            "fixes",
            "hold a knob at a value, e.g. --fix batch_size=256, or a call site of a plain "
            "file or script, e.g. --fix batch@train.py:30.batch_size=64",
        )
        search.add_argument(
            "--input-only",
            action="store_true",
            help="search input knobs alone: batch size, shuffle buffer, precision and the "
            "call sites holding them stay as written",
        )
        search.add_argument(
            "--training-change-margin",
            type=_margin,
            default=default("training_change_margin"),
            metavar="X",
            help="recommend a change to batch size, shuffle buffer or precision only when it "
            "runs X times as fast as the best configuration that leaves training as written, "
            "beyond the noise (default: %(default)s)",
        )
        search.add_argument(
            "--objective",
            choices=[o.value for o in Objective],
            default=default("objective").value,
            help="throughput: most examples/s; throughput-ram: trade examples/s against peak "
            "host RAM and report the Pareto front (default: %(default)s)",
        )
        search.add_argument("--seed", type=int, default=None, help="seed of the TPE sampler")
        search.add_argument(
            "--reorder",
            action="store_true",
            help="plain file or script: also try moving a map after the batch that reads it "
            "when its function traces on a batch (it may compute something else on a batch: "
            "check the patch)",
        )
        search.add_argument(
            "--no-prune",
            dest="prune",
            action="store_false",
            help="measure every trial fully (by default a trial running below half the best "
            "throughput so far is stopped after a quarter of its measured steps)",
        )
        measure = parser.add_argument_group("measurement")
        add_measurement_arguments(
            measure, steps=default("steps"), min_seconds=default("min_seconds")
        )
        measure.add_argument(
            "--finalists",
            type=positive_int,
            default=default("finalists"),
            metavar="K",
            help="best trials re-measured beside the two references at the end "
            "(default: %(default)s)",
        )
        measure.add_argument(
            "--rounds",
            type=positive_int,
            default=default("rounds"),
            metavar="R",
            help="interleaved rounds of re-measurement (default: %(default)s)",
        )
        budgets = parser.add_argument_group("budgets")
        budgets.add_argument(
            "--ram-budget",
            type=byte_size,
            default=None,
            metavar="SIZE",
            help="host RAM one trial may use, e.g. 8G (default: 60%% of the RAM available when "
            "the study starts); a trial over it is stopped and recorded as infeasible",
        )
        budgets.add_argument(
            "--gpu-memory-budget",
            type=byte_size,
            default=None,
            metavar="SIZE",
            help="GPU memory one trial may use, e.g. 20G (needs NVML)",
        )
        budgets.add_argument(
            "--trial-timeout",
            type=positive_float,
            default=default("trial_timeout_s"),
            metavar="S",
            help="seconds one trial may run before it is stopped (default: %(default)s)",
        )
        budgets.add_argument(
            "--max-failures",
            type=positive_int,
            default=default("max_consecutive_failures"),
            metavar="N",
            help="stop the study after N consecutive failed trials (default: %(default)s); "
            "a trial over a budget counts only until one within the budgets has completed",
        )
        store = parser.add_argument_group("storage")
        store.add_argument(
            "--storage",
            default=None,
            metavar="URL",
            help="an Optuna storage URL: sqlite:///path.db, postgresql://user@host/db, "
            "journal:///path (default: sqlite under studies/, one file per pipeline)",
        )
        store.add_argument(
            "--study",
            default=None,
            metavar="NAME",
            help="study name (default: the pipeline file's name)",
        )
        output = parser.add_argument_group("output")
        add_output_arguments(
            output,
            json_default="reports/<study>-tune.json",
            html_default="reports/<study>.html, written also when the study stops early, "
            "with the trials so far",
        )
        output.add_argument(
            "--write-patch",
            type=Path,
            nargs="?",
            const=_STUDY_PATCH,
            default=None,
            metavar="PATH",
            help="for a plain file or a script: save the recommended values as a unified diff "
            "of your files (default PATH: reports/<study>.patch); apply it from the file's "
            "folder with `patch -p0 < PATH` or `git apply PATH`",
        )
        output.add_argument(
            "--no-verify",
            dest="verify",
            action="store_false",
            help="with --write-patch: do not measure the patched files against the original "
            "(by default they run side by side, interleaved, 2 x --rounds runs)",
        )
        add_device_arguments(parser)
        add_step_time_argument(search)
        add_service_argument(parser)

    def run(self, args: argparse.Namespace) -> int:
        from tfperf.pipeline import check_source

        outputs = _check_outputs(args)
        warn_other_tuners()
        check_source(args.pipeline)  # a broken file fails before TensorFlow loads
        framework = frameworks.detect(args.pipeline)
        # The trials' zygote imports the framework beside this process's own setup.
        with forked_trials(framework.preload, at_once=True):
            return self._tune(args, outputs, framework)

    def _tune(
        self, args: argparse.Namespace, outputs: _Outputs, framework: frameworks.Framework
    ) -> int:
        from tfperf.pipeline import load_pipeline
        from tfperf.tuner import Tuner

        if not args.debug:
            framework.start()  # the framework's import, quietly
            import optuna

            optuna.logging.set_verbosity(optuna.logging.WARNING)
        from tfperf.cli._reorder import reorder_when_asked
        from tfperf.cli.sites import find_sites

        pipeline = load_pipeline(
            args.pipeline, getattr(args, "script_args", ()), needs_step=args.step_time is None
        )
        check_assignments(args.fixes, pipeline.framework, shown=str(args.pipeline), option="--fix")
        _check_patchable(outputs, pipeline)
        announced = frameworks.get(pipeline.framework).announce(pipeline)
        if announced is not None:
            say(announced, args)
        pipeline = find_sites(pipeline, quiet=args.quiet)
        check_loaded(outputs.named(args), pipeline)
        pipeline = reorder_when_asked(pipeline, asked=args.reorder)  # issue 15: --reorder
        _check_devices(args, pipeline)
        pipeline = _through_service(args, pipeline)
        options = self._options(args, pipeline)
        with TuneProgress(options.trials, enabled=not args.quiet) as listener:
            tuner = Tuner(pipeline, options, listener)
            result = _search(tuner, listener, outputs)
            if isinstance(result, int):
                return result
        from tfperf.cli.sites import attach_handover  # issue 15: the verified patch

        attach_handover(tuner, result, verify=outputs.patch is not None and args.verify)
        return _finish(tuner, result, pipeline, outputs)

    @staticmethod
    def _options(args: argparse.Namespace, pipeline: PipelineFile | None = None) -> TuneOptions:
        layout, strategy = device_options(args, pipeline)
        return TuneOptions(
            trials=args.trials or (None if args.timeout or args.time_limit else default("trials")),
            timeout_s=args.timeout,
            time_limit_s=args.time_limit,
            trial_timeout_s=args.trial_timeout,
            steps=args.steps,
            min_seconds=args.min_seconds,
            warmup=args.warmup,
            epoch_steps=args.epoch_steps,
            ram_budget_bytes=args.ram_budget,
            gpu_memory_budget_bytes=args.gpu_memory_budget,
            objective=Objective(args.objective),
            fixes={**gpu_memory_fixes(args), **dict(args.fixes)},
            input_only=args.input_only,
            training_change_margin=args.training_change_margin,
            storage=args.storage,
            study_name=args.study,
            seed=args.seed,
            finalists=args.finalists,
            rounds=args.rounds,
            max_consecutive_failures=args.max_failures,
            prune=args.prune,
            layout=layout,
            strategy=strategy,
            step_time_s=args.step_time,
        )


@dataclasses.dataclass(frozen=True)
class _Outputs:
    """Where this run writes, each path checked before the search starts."""

    json: Path
    html: Path
    patch: Path | None

    def named(self, args: argparse.Namespace) -> list[tuple[str, Path]]:
        """Each path with the option that named it, or words for a default path."""
        named = [
            ("--json" if args.json else "the summary JSON", self.json),
            ("--html" if args.html else "the HTML report", self.html),
        ]
        return named + ([("--write-patch", self.patch)] if self.patch is not None else [])


def _check_outputs(args: argparse.Namespace) -> _Outputs:
    """Every output path, refused now if it cannot be written or would replace an input or
    another output (not after an hour of tuning)."""
    from tfperf.report import default_study_path
    from tfperf.study.storage import storage_file, study_name_for

    name = safe_stem(args.study or Path(args.pipeline).stem)  # the study's default name
    json_path = args.json or DEFAULT_REPORTS_DIR / f"{name}-tune.json"
    html_path = args.html or default_study_path(name)
    patch_path = args.write_patch
    if patch_path == _STUDY_PATCH:
        patch_path = DEFAULT_REPORTS_DIR / f"{name}.patch"
    outputs = _Outputs(json=json_path, html=html_path, patch=patch_path)
    inputs = [("the pipeline file", Path(args.pipeline))]
    storage = storage_file(args.storage) if args.storage else None
    default_storage = Path("studies") / f"{study_name_for(Path(args.pipeline))}.db"
    inputs.append(("the study storage", Path(storage) if storage else default_storage))
    check_outputs(outputs.named(args), inputs)
    return outputs


def _check_patchable(outputs: _Outputs, pipeline: PipelineFile) -> None:
    """Refuses `--write-patch` for a file that reads its knobs, before the study: no patch of
    its code holds a configuration, its `BASELINE` does."""
    from tfperf.pipeline import PipelineKind

    if outputs.patch is None or pipeline.kind is not PipelineKind.KNOBS:
        return
    framework = frameworks.get(pipeline.framework)
    raise OutputPathError(
        f"--write-patch: {pipeline.path.name} reads its knobs "
        f"(`{framework.input_function}(knobs)`), so no patch of its code could hold a "
        "configuration: the study's recommendation is a BASELINE to copy into the file. "
        "--write-patch is for plain files and training scripts, whose values are written in "
        "their calls; leave it out."
    )


def _search(tuner: Tuner, listener: TuneProgress, outputs: _Outputs) -> TuneResult | int:
    """Runs the search; an exit status when it stopped early (the report is written then)."""
    from tfperf.study.storage import explain_storage_failure
    from tfperf.tuner import OverBudget, TooManyFailures, TuneInterrupted

    try:
        return tuner.run()
    except TuneInterrupted as error:
        listener.close()
        return _interrupted(tuner, error, outputs)
    except (TooManyFailures, NothingCompleted, OverBudget):
        # The report shows every failed trial with its reason.
        listener.close()
        print(f"Report: {_report_or_note(tuner, outputs.html)}", file=sys.stderr)
        raise
    except Exception as error:
        explained = explain_storage_failure(tuner.storage_url, error)
        if explained is None:
            raise
        raise explained from None


def _interrupted(tuner: Tuner, error: Exception, outputs: _Outputs) -> int:
    """Says how to resume first, so a second Ctrl-C during the report still leaves it said."""
    status = interrupted_status()
    print(f"tfperf: {error}\nResume with: {resume_command(tuner)}", file=sys.stderr, flush=True)
    try:
        print(
            f"Report of the trials so far: {_report_or_note(tuner, outputs.html)}", file=sys.stderr
        )
    except KeyboardInterrupt:
        print("tfperf: interrupted again; the report was not written.", file=sys.stderr)
    return status


def _report_or_note(tuner: Tuner, path: Path, result: TuneResult | None = None) -> str:
    """The report's path, or why it could not be written (the study holds the trials anyway)."""
    try:
        return str(write_study_report(tuner, path, result))
    except TfperfError as error:
        return f"not written ({error}); `tfperf report {tuner.storage_shown}` draws it later"


def _finish(tuner: Tuner, result: TuneResult, pipeline: PipelineFile, outputs: _Outputs) -> int:
    from tfperf.cli._gpu_memory import recommended_gpu_memory
    from tfperf.cli.sites import patch_section
    from tfperf.pipeline import PipelineKind
    from tfperf.report import render_tune_summary
    from tfperf.units import format_seconds

    json_path, failed = save_or_rescue(result.save, outputs.json, "The summary")
    html_path = _report_or_note(tuner, outputs.html, result)
    reads_knobs = pipeline.kind is PipelineKind.KNOBS
    print(render_tune_summary(result, dashboard_url=tuner.storage_shown, reads_knobs=reads_knobs))
    if (step_s := tuner.options.step_time_s) is not None:
        print(
            f"\nEvery trial ran against an emulated {format_seconds(step_s)} step (--step-time): "
            "these rates are what the input sustains feeding an accelerator of that step."
        )
    if gpu_memory := recommended_gpu_memory(tuner.ledger.study, result):
        print(f"\n{gpu_memory}")
    patch = patch_section(pipeline, result, outputs.patch)
    if patch:
        print(f"\n{patch}")
    print(f"\nSummary JSON: {json_path}\nHTML report: {html_path}")
    return 1 if failed else 0


def default(option: str) -> Any:
    """`TuneOptions`' default for `option`: the one place the CLI's defaults come from."""
    field = next(field for field in dataclasses.fields(TuneOptions) if field.name == option)
    if field.default is dataclasses.MISSING:
        raise ValueError(f"TuneOptions.{option} has no plain default to show on the command line")
    return field.default


def write_study_report(tuner: Tuner, path: Path | None, result: TuneResult | None) -> Path:
    """Renders the study's HTML report from storage, with what this run found (the limit, the
    estimate, the hand-over) when it finished."""
    from tfperf.report import default_study_path, load_snapshot, render_study_html, write_html

    snapshot = load_snapshot(tuner.storage_url, tuner.study_name)
    html = render_study_html(snapshot, tune=result)
    return write_html(html, path or default_study_path(tuner.study_name))


def _through_service(args: argparse.Namespace, pipeline: PipelineFile) -> PipelineFile:
    """With `--service`: the pipeline whose baseline reads through it (so every trial does,
    and the service knobs are searched), once the dispatcher answers and every stage can run
    on a worker."""
    if args.service is None:
        return pipeline
    baseline = pipeline.baseline.replace(service=args.service)
    check_service(args, pipeline, baseline)
    from tfperf.knobs import KNOBS, Fixed

    space = dict(pipeline.search_space)
    if KNOBS.service.name in space:  # fixed at the code's own (none) where no patch writes it
        space[KNOBS.service.name] = Fixed(args.service)
    return dataclasses.replace(pipeline, baseline=baseline, search_space=space)


def _check_devices(args: argparse.Namespace, pipeline: PipelineFile) -> None:
    """Says which GPU flags this machine ignores; refuses `--cpu-replicas` above the baseline's
    global batch before the first trial, which would wait forever on a replica with no
    examples."""
    from tfperf.knobs import KNOBS

    batch = dict(args.fixes).get(KNOBS.batch_size.name, pipeline.baseline.batch_size)
    check_device_flags(args, pipeline, pipeline.baseline.replace(batch_size=batch))


def warn_other_tuners() -> list[int]:
    """Warns on stderr when other tuners run on this machine; returns their process ids.

    Trials on the same cores at the same time corrupt each other's timings (see the README).
    """
    import psutil

    me = psutil.Process()
    # This tuner's own wrappers (`timeout`, `nice`, a scheduler's launcher) name it too.
    mine = {me.pid} | {parent.pid for parent in me.parents()}
    others = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        info = process.info
        if info["pid"] in mine:
            continue
        if _is_tuner(info.get("cmdline") or []):
            others.append(int(info["pid"]))
    if others:
        listed = ", ".join(str(pid) for pid in others)
        print(
            f"Warning: another tfperf tuner is running on this machine (pid {listed}). Trials "
            "on the same cores at once disturb each other's timings: let it finish, or run "
            "this study on another machine with a shared --storage.",
            file=sys.stderr,
        )
    return others


def _is_tuner(argv: Sequence[str]) -> bool:
    """Whether a command line is `tfperf [--debug] tune ...`, or a trial or the zygote of
    another tuner.

    Judged by the command a process runs itself (the program, or the script or module its
    Python runs), never by words further on: `/usr/bin/time tfperf tune`, `timeout 600 tfperf
    tune` and `bash -c "tfperf tune ..."` are wrappers whose arguments name a tuner, and the
    tuner they start is listed on its own.
    """
    command, rest = _own_command(argv)
    if command in ("tfperf.trials._worker", "tfperf.trials._zygote"):
        return True
    if command in ("tfperf", "tfperf.cli.main"):
        rest = [item for item in rest if item != "--debug"]
        return bool(rest) and rest[0] == "tune"
    return False


#: Python's options that take the next argument as their value.
_PYTHON_VALUE_OPTIONS = frozenset(("-W", "-X", "--check-hash-based-pycs"))


def _own_command(argv: Sequence[str]) -> tuple[str, list[str]]:
    """The program a command line runs (a Python's script or `-m` module in its place) and
    the arguments it gets: `python -m tfperf tune x.py` -> ("tfperf", ["tune", "x.py"])."""
    if not argv:
        return "", []
    program = os.path.basename(argv[0])
    if not program.startswith("python"):
        return program, list(argv[1:])
    index = 1
    while index < len(argv) and argv[index].startswith("-") and argv[index] != "-":
        option = argv[index]
        if option == "-m" and index + 1 < len(argv):
            return argv[index + 1], list(argv[index + 2 :])
        if option == "-c":
            return "", []
        index += 2 if option in _PYTHON_VALUE_OPTIONS else 1
    if index >= len(argv):
        return "", []
    return os.path.basename(argv[index]), list(argv[index + 1 :])


def resume_command(tuner: Any) -> str:
    """The command line that resumes this study, with any storage password masked."""
    argv = list(sys.argv[1:])
    for index, value in enumerate(argv):
        if index > 0 and argv[index - 1] == "--storage":
            argv[index] = tuner.storage_shown
        elif value.startswith("--storage="):
            argv[index] = f"--storage={tuner.storage_shown}"
    return "tfperf " + shlex.join(argv)


def _margin(text: str) -> float:
    """argparse type for `--training-change-margin`: a factor of at least 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number such as 1.2, not {text!r}") from None
    if not 1 <= value < float("inf"):
        raise argparse.ArgumentTypeError(
            f"must be at least 1 (1: any gain beyond noise), not {text}"
        )
    return value
