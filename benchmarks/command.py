"""`python -m benchmarks`: tune and measure every benchmark pipeline, write RESULTS.md.

For each pipeline: prepare its data (untimed), `tfperf tune` it on a fresh study with a fixed
trial budget, then measure its baseline, AUTOTUNE and tuned configurations side by side.
Each study's time split is read back from it (`benchmarks.answer`). Then the repeatability
of one configuration, the plain-file twin's and the PyTorch script's zero-change hand-over,
the profiler's overhead, the emulated accelerator step against its known answer, the
interpreter lock's wait by thread count on remote_storage's reads, `tfperf
offload`'s predicted per-worker rate against the real local tf.data service (k = 1 and 2
workers), the known-truth family's checks, and one default `tfperf profile` of the quickstart
against `tfperf tune --trials 8` of it. The figures are saved as a JSON record with the date
and the commit, and RESULTS.md is rendered from that record alone.

    python -m benchmarks                      # the full run (about 2 hours on 2 cores)
    python -m benchmarks --only remote_storage --trials 8 --no-extras
    python -m benchmarks --smoke              # one pipeline, tiny budget: the runner works
    python -m benchmarks --render benchmarks/RESULTS.json   # re-render a saved run
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks import measure
from benchmarks.answer import profile_against_tune
from benchmarks.answer_record import ProfileAgainstTune
from benchmarks.emulated_step_record import EmulatedStepRow, run_emulated_step
from benchmarks.generated_record import KnownTruthCheck, run_known_truth
from benchmarks.lock_wait_record import LockWaitRow, run_lock_wait
from benchmarks.offload import measure_offload
from benchmarks.offload_record import OffloadResult
from benchmarks.record import (
    DIRTY,
    BenchRecord,
    Failure,
    Machine,
    PipelineRecord,
    Repeatability,
)
from benchmarks.render import render
from benchmarks.suite import (
    BENCHMARKS_DIR,
    SMOKE,
    SMOKE_PIPELINE,
    SUITE,
    Settings,
    Spec,
    SuiteError,
    select,
)
from benchmarks.torch_script_record import TorchScript, run_torch_script
from benchmarks.zero_change import run_zero_change
from tfperf.errors import ResultFileError, TfperfError
from tfperf.trials import Budgets

if TYPE_CHECKING:
    from tfperf.knobs import Knobs
    from tfperf.pipeline import PipelineFile

REPO = BENCHMARKS_DIR.parent
FULL_OUTPUT = BENCHMARKS_DIR / "RESULTS.md"
SMOKE_OUTPUT = REPO / "reports" / "bench-smoke.md"
_BF16_FLAGS = ("amx_bf16", "avx512_bf16", "bf16")


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit status (0 done, 2 usage, 130 Ctrl-C).

    Pipelines that fail are listed in the report rather than failing the run.
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(arguments)
    if args.render is not None:
        return _render_only(args.render, args.output or args.render.with_suffix(".md"))
    try:
        settings = _settings(args)
        specs = select(args.only or ([SMOKE_PIPELINE] if args.smoke else None))
        studies = _studies_dir(args.studies, specs)
    except SuiteError as error:
        print(f"benchmarks: error: {error}", file=sys.stderr)
        return 2
    output = args.output or (SMOKE_OUTPUT if args.smoke else FULL_OUTPUT)
    record_path = args.record or output.with_suffix(".json")
    log = _logger(args.quiet)
    command = shlex.join(["python", "-m", "benchmarks", *arguments])
    try:
        record = run(specs, settings, studies, command, log)
    except KeyboardInterrupt:
        print("benchmarks: interrupted; no report written", file=sys.stderr)
        return 130
    record.save(record_path)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(render(record), encoding="utf-8")
    log(f"wrote {output} and {record_path}; the run took {record.wall_s / 60:.1f} min")
    return 0


def run(
    specs: Sequence[Spec], settings: Settings, studies: Path, command: str, log: measure.Log
) -> BenchRecord:
    """Measures `specs`, the repeatability and the overhead; returns the record.

    A pipeline that fails is recorded with its reason and the run goes on; Ctrl-C stops it.
    """
    import optuna

    import tfperf
    from tfperf.frameworks.tensorflow._tf import import_tensorflow_quietly
    from tfperf.tuner import TuneInterrupted

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # tfperf reports what matters
    import_tensorflow_quietly()  # each pipeline file imports it; its start-up lines say nothing
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    commit = _commit()  # before measuring: the code measured, not the code at the end
    clock = time.monotonic()
    pipelines: list[PipelineRecord] = []
    failures: list[Failure] = []
    repeatability: Repeatability | None = None
    for spec in specs:
        try:
            loaded = tfperf.load_pipeline(spec.path)
            pipeline, budgets, tuned = _bench_one(spec, loaded, settings, studies, log)
        except TuneInterrupted:
            raise KeyboardInterrupt from None
        except (measure.BenchError, TfperfError) as error:
            log(f"{spec.name}: FAILED, going on with the others: {error}")
            failures.append(Failure(spec.name, str(error)))
            continue
        pipelines.append(pipeline)
        if repeatability is None:
            log(f"{spec.name}: repeatability, {settings.cv_repeats} runs of the tuned knobs")
            repeatability = measure.measure_repeatability(spec, tuned, settings, budgets, log)
    zero_change = run_zero_change(specs, settings, studies, log, failures)
    overhead = None
    if settings.overhead:
        log("profiler overhead (python -m benchmarks.overhead)")
        workloads = ["fast"] if settings.smoke else ["fast", "quickstart"]
        try:
            overhead = measure.measure_overhead(settings, workloads)
        except measure.BenchError as error:
            log(f"profiler overhead: FAILED: {error}")
            failures.append(Failure("overhead", str(error)))
    emulated_step: list[EmulatedStepRow] = []
    try:  # an extra: its own TensorFlow would add seconds to the suite's smoke test
        emulated_step = run_emulated_step(log) if settings.extras else []
    except RuntimeError as error:
        log(f"emulated accelerator step: FAILED: {error}")
        failures.append(Failure("emulated_step", str(error)))
    lock_wait: list[LockWaitRow] = []
    try:  # an extra: a TensorFlow in a child per thread count
        lock_wait = run_lock_wait(log) if settings.extras else []
    except RuntimeError as error:
        log(f"the interpreter lock: FAILED: {error}")
        failures.append(Failure("lock_wait", str(error)))
    offload: OffloadResult | None = None
    try:  # an extra too: it starts a service and worker processes
        offload = measure_offload(log) if settings.extras else None
    except RuntimeError as error:
        log(f"offload: FAILED: {error}")
        failures.append(Failure("offload", str(error)))
    heavy = _heavy_sections(settings, studies, log, failures)
    return BenchRecord(
        command=command,
        started_at=started,
        wall_s=time.monotonic() - clock,
        smoke=settings.smoke,
        machine=_machine(),
        settings=dataclasses.asdict(settings),
        pipelines=pipelines,
        repeatability=repeatability,
        overhead=overhead,
        failures=failures,
        zero_change=zero_change,
        emulated_step=emulated_step,
        lock_wait=lock_wait,
        offload=offload,
        torch_script=heavy.torch_script,
        known_truth=heavy.known_truth,
        profile_against_tune=heavy.profile_against_tune,
        commit=commit,
    )


@dataclasses.dataclass
class _Heavy:
    """The extras measured last (each minutes long, each in its own processes)."""

    torch_script: TorchScript | None = None
    known_truth: list[KnownTruthCheck] = dataclasses.field(default_factory=list)
    profile_against_tune: ProfileAgainstTune | None = None


def _heavy_sections(
    settings: Settings, studies: Path, log: measure.Log, failures: list[Failure]
) -> _Heavy:
    """The PyTorch script, the known-truth family, and the quickstart's profile against its
    tune, each in children; none without `settings.extras` (a smoke run has none). One that
    fails is added to `failures`."""
    heavy = _Heavy()
    if not settings.extras:
        return heavy
    try:
        heavy.torch_script = run_torch_script(settings.trials, studies / "torch_script", log)
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        log(f"PyTorch script: FAILED: {error}")
        failures.append(Failure("torch_script", str(error)))
    try:
        heavy.known_truth = run_known_truth(log)
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        log(f"known-truth family: FAILED: {error}")
        failures.append(Failure("known_truth", str(error)))
    try:
        heavy.profile_against_tune = profile_against_tune(log)
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        log(f"time to an answer: FAILED: {error}")
        failures.append(Failure("profile_against_tune", str(error)))
    return heavy


def _commit() -> str | None:
    """`git rev-parse --short HEAD`, with DIRTY when tracked files have uncommitted changes;
    None where git cannot tell (no git, not a checkout)."""
    try:
        head = _git("rev-parse", "--short", "HEAD")
        changed = _git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + (DIRTY if changed else "")


def _git(*arguments: str) -> str:
    done = subprocess.run(["git", *arguments], cwd=REPO, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def _bench_one(
    spec: Spec, pipeline: PipelineFile, settings: Settings, studies: Path, log: measure.Log
) -> tuple[PipelineRecord, Budgets, Knobs]:
    """Prepares and tunes one pipeline, then measures its three configurations side by side."""
    log(f"{spec.name}: preparing its data (not timed)")
    measure.prepare(spec, pipeline)
    storage = f"sqlite:///{studies / spec.name}.db"
    steps = settings.steps_for(spec)
    log(f"{spec.name}: tuning, {settings.trials} trials of {steps} steps ({storage})")
    result, tuning = measure.tune(spec, pipeline, settings, storage)
    log(f"{spec.name}: tuned in {tuning.wall_s / 60:.1f} min; tfperf chose {result.best.label}")
    configurations = measure.final_configurations(pipeline, result)
    budgets = Budgets(ram_bytes=result.ram_budget_bytes, timeout_s=spec.trial_timeout_s)
    log(f"{spec.name}: final figures, {settings.repeats} interleaved repeats")
    figures = measure.measure_final(spec, configurations, settings, budgets, log)
    record = PipelineRecord(
        name=spec.name,
        bottleneck=spec.bottleneck,
        expectation=spec.expectation,
        beyond_autotune=spec.beyond_autotune,
        steps=steps,
        repeats=settings.repeats,
        tuning=tuning,
        baseline=figures["baseline"],
        autotune=figures["autotune"],
        tuned=figures["tuned"],
        autotune_goal=spec.autotune_goal,
        reference=measure.reference_name(pipeline),
    )
    return record, budgets, configurations["tuned"]


def _machine() -> Machine:
    from tfperf.hardware import collect_environment, detect_machine, read_cpuinfo

    environment = collect_environment([])
    machine = detect_machine()
    cpuinfo = read_cpuinfo()
    flags = set(cpuinfo.get("flags", "").split()) | set(cpuinfo.get("Features", "").split())
    return Machine(
        cpu_model=environment.cpu_model,
        cpu_count=machine.cpu_count,
        total_ram_bytes=machine.total_ram_bytes,
        bf16_flags=[flag for flag in _BF16_FLAGS if flag in flags],
        platform=environment.platform,
        python_version=environment.python_version,
        tensorflow_version=environment.tensorflow_version,
        tfperf_version=environment.tfperf_version,
    )


def _render_only(record_path: Path, output: Path) -> int:
    try:
        record = BenchRecord.load(record_path)
    except ResultFileError as error:
        print(f"benchmarks: error: {error}", file=sys.stderr)
        return 2
    output.write_text(render(record), encoding="utf-8")
    print(f"rendered {record_path} -> {output}")
    return 0


def _settings(args: argparse.Namespace) -> Settings:
    base = SMOKE if args.smoke else Settings()
    given = {
        name: getattr(args, name)
        for name in (
            "trials",
            "steps",
            "repeats",
            "finalists",
            "rounds",
            "cv_repeats",
            "seed",
            "overhead_steps",
            "overhead_repeats",
        )
        if getattr(args, name) is not None
    }
    if args.no_overhead:
        given["overhead"] = False
    if args.no_extras:
        given["extras"] = False
    return dataclasses.replace(base, **given)


def _studies_dir(given: Path | None, specs: Sequence[Spec]) -> Path:
    """A folder for this run's studies; an existing study file there is refused.

    A benchmark must never resume an old study: its trial budget and timings would mix runs.
    """
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    folder = given or REPO / "studies" / f"bench-{stamp}-{os.getpid()}"
    stale = [folder / f"{spec.name}.db" for spec in specs if (folder / f"{spec.name}.db").exists()]
    if stale:
        raise SuiteError(
            f"{', '.join(map(str, stale))} already exist{'s' if len(stale) == 1 else ''}: the "
            "benchmark would resume an old study instead of starting fresh. Pass a new "
            "--studies folder, or delete the old files."
        )
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _logger(quiet: bool) -> measure.Log:
    start = time.monotonic()

    def log(message: str) -> None:
        if not quiet:
            elapsed = int(time.monotonic() - start)
            print(f"[{elapsed // 60:3d}:{elapsed % 60:02d}] {message}", file=sys.stderr, flush=True)

    return log


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    parser.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        help="run only this pipeline (repeatable): " + ", ".join(spec.name for spec in SUITE),
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help=f"a fast check that the runner works: {SMOKE_PIPELINE} only, the two reference "
        f"trials, {SMOKE.steps} steps, every figure once; writes {SMOKE_OUTPUT.relative_to(REPO)}",
    )
    budget = parser.add_argument_group("budget (defaults: the full run's, or --smoke's)")
    for flag, meta, text in (
        ("--trials", "N", f"trials per study (full run: {Settings.trials})"),
        ("--steps", "N", "measured steps per phase, for every pipeline (default: each its own)"),
        ("--repeats", "N", f"interleaved repeats of the final figures (full: {Settings.repeats})"),
        ("--finalists", "K", f"finalists tfperf tune re-measures (full: {Settings.finalists})"),
        ("--rounds", "R", f"rounds of tfperf tune's re-measurement (full: {Settings.rounds})"),
        ("--cv-repeats", "N", f"runs of the repeatability check (full: {Settings.cv_repeats})"),
        ("--overhead-steps", "N", f"steps of the overhead benchmark ({Settings.overhead_steps})"),
        ("--overhead-repeats", "N", f"its repeats (full: {Settings.overhead_repeats})"),
        ("--seed", "S", f"seed of tfperf tune's sampler (default: {Settings.seed})"),
    ):
        budget.add_argument(flag, type=int, default=None, metavar=meta, help=text)
    budget.add_argument(
        "--no-overhead", action="store_true", help="skip the profiler-overhead benchmark"
    )
    budget.add_argument(
        "--no-extras",
        action="store_true",
        help="skip the benchmarks beyond the pipelines (as --smoke does): the emulated step, "
        "offload, the PyTorch script, the known-truth family, the profile against the tune",
    )
    files = parser.add_argument_group("files")
    files.add_argument(
        "--output",
        type=Path,
        default=None,
        metavar="PATH",
        help=f"the report (default: {FULL_OUTPUT.relative_to(REPO)}, or "
        f"{SMOKE_OUTPUT.relative_to(REPO)} with --smoke)",
    )
    files.add_argument(
        "--record",
        type=Path,
        default=None,
        metavar="PATH",
        help="the JSON record the report is rendered from (default: beside --output, .json)",
    )
    files.add_argument(
        "--studies",
        type=Path,
        default=None,
        metavar="DIR",
        help="where the tuning studies go; must not hold them already (default: a new "
        "studies/bench-<time>-<pid>/ folder, git-ignored)",
    )
    files.add_argument(
        "--render",
        type=Path,
        default=None,
        metavar="RECORD",
        help="only re-render a saved JSON record, measuring nothing (to --output, or beside "
        "the record with .md)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return parser
