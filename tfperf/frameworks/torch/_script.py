"""Runs an ordinary PyTorch training script, clocking the steps of its own loop.

A script that builds a `DataLoader` and trains in its own loop (`for x, y in loader: ...`) has
no `fit` to take over at. tfperf runs it as `python train.py ARGS` would
(`pipeline.run_as_main`: `__name__ == "__main__"`, also for the workers a spawn or forkserver
start imports it in, `sys.argv == [train.py, *ARGS]`, its folder first on `sys.path`; all
restored when tfperf is done with the loader), with every `DataLoader(...)` call of the
user's recorded and its arguments overridden by site (`_sites`), and the first loader of the
user's (or one a library made when the user's code called it) that the script iterates
*measured* (an evaluation pass under `torch.no_grad()` ahead of training aside): `iter(loader)`
hands the loop (or the library's own iterator) a timed iterator (`_script_iter`), in which

- time inside `next()` is *waiting* for the loader,
- time from one batch's return to the next `next()` is *computing* (the training step, and
  whatever else the loop does per batch).

After `warmup + steps` batches, the next `next()` raises a private exception (a
`BaseException`, so the script's `except Exception` lets it through), caught around the run:
no more training happens. Each mode (`ScriptMode`) measures one thing:

- `END_TO_END`: the loop as written, on the real loader (each pass's first wait runs from its
  `iter(loader)`, where torch starts the workers);
- `COMPUTE_ONLY`: the loop on one batch fetched once and served again at every `next()`, the
  compute-only ceiling (the loader then costs nothing);
- `LOADER_ONLY`: the script stops when the loop first iterates the loader, and tfperf
  iterates that loader alone, the rate the loader can deliver;
- `DISCOVER`: stops there too, measuring nothing: the call sites as written.

With CUDA in use, each `next()` first waits for the GPU work queued so far
(`torch.cuda.synchronize()`), so a step's GPU time is clocked as computing, not as the next
wait. A new epoch is a new `iter(loader)`: without `persistent_workers` it starts the workers
again and its first `next()` waits for them, both counted as that step's wait, as in training.

Interface (the framework calls these):

- `profile_script_pipeline(pipeline, knobs, *, steps, ...) -> (ProfileResult,
  ScriptProfile)`: `Framework.profile` of a script, knobs' sites and threads applied;
- `profile_script(path, argv, overrides, profiler, *, steps, min_seconds=0.0, threads=None,
  on_loader=None) -> ScriptProfile`: the three phases in one run of the script, recorded by
  the core's `tfperf.Profiler` (its `result()` is the `ProfileResult`);
- `run_script(path, argv, overrides, *, steps, mode, warmup=2, threads=None) -> ScriptRun`:
  one mode, clocked here (the call sites alone: `ScriptMode.DISCOVER`).

Example:
    >>> run = run_script("train.py", ["--epochs", "3"], {}, steps=20,
    ...                  mode=ScriptMode.END_TO_END)  # doctest: +SKIP
    >>> run.loader, round(run.wait_fraction, 2)  # doctest: +SKIP
    ('train.py:40', 0.93)
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfperf.errors import PipelineFileError, PipelineRuntimeError, TfperfError
from tfperf.frameworks.torch._script_iter import (
    Profiled,
    ScriptMode,
    Timer,
    cuda_sync,
    iterate_alone,
    measuring,
)
from tfperf.frameworks.torch._sites import ARGUMENTS, THREADS_KNOB, LoaderRecorder, recording
from tfperf.measure.served import InStep, Stop, script_phase_s
from tfperf.pipeline import run_as_main
from tfperf.probes import MemoryPeak
from tfperf.results import JsonRecord
from tfperf.results.discovery import Discovery
from tfperf.tracebacks import exception_user_frames, format_frames

if TYPE_CHECKING:
    from tfperf.knobs import Knobs
    from tfperf.measure import EpochInfo, Profiler, ProgressCallback
    from tfperf.pipeline import PipelineFile
    from tfperf.probes import Probe
    from tfperf.results import ProfileResult


#: The measured loader's arguments read back into `ScriptRun.options`.
_OPTIONS = tuple(argument for argument, _, _ in ARGUMENTS)


@dataclasses.dataclass(frozen=True)
class ScriptRun(JsonRecord):
    """One run of a script: its call sites, and the measured loop's steps.

    Attributes:
        mode: what was measured.
        discovery: the measured loader's sites (others' calls listed as not tunable); `end`
            is the measured loader's `FILE:LINE`, None when the script iterated none.
        options: the measured loader's arguments, overrides applied, by argument name.
        warmup: steps run before the measured ones.
        first_batch_s: seconds inside the first `next()` (workers starting, first batch).
        waits_s: per measured step, seconds inside `next()`.
        computes_s: per measured step, seconds from its batch's return to the next `next()`.
        completed: whether the script reached `warmup + steps` batches (False: it ended
            first, and fewer steps were measured).
    """

    mode: ScriptMode
    discovery: Discovery
    options: dict[str, int | bool | None] = dataclasses.field(default_factory=dict)
    warmup: int = 0
    first_batch_s: float | None = None
    waits_s: tuple[float, ...] = ()
    computes_s: tuple[float, ...] = ()
    completed: bool = False

    @property
    def loader(self) -> str | None:
        """Where the measured loader is made, `train.py:40`."""
        return self.discovery.end

    @property
    def steps(self) -> int:
        return len(self.waits_s)

    @property
    def step_s(self) -> float:
        """Mean seconds per measured step, waiting and computing."""
        return (sum(self.waits_s) + sum(self.computes_s)) / self.steps if self.steps else 0.0

    @property
    def wait_fraction(self) -> float:
        """The share of a step spent waiting for the loader."""
        total = sum(self.waits_s) + sum(self.computes_s)
        return sum(self.waits_s) / total if total > 0 else 0.0

    @property
    def batches_per_sec(self) -> float:
        return 1.0 / self.step_s if self.step_s > 0 else 0.0

    @property
    def examples_per_sec(self) -> float | None:
        """Examples per second, where the loader's `batch_size` is known."""
        size = self.options.get("batch_size")
        if not isinstance(size, int) or isinstance(size, bool):
            return None
        return size * self.batches_per_sec

    @classmethod
    def from_dict(cls, data: Any) -> ScriptRun:
        return cls.validate(data)


@dataclasses.dataclass(frozen=True)
class ScriptProfile:
    """What `profile_script` found besides the profiler's phases.

    Attributes:
        discovery: the measured loader's sites, as `ScriptRun.discovery`.
        options: the measured loader's arguments, overrides applied.
        loader: the measured `DataLoader` itself (its workers shut down), for the framework
            to time its items (`_items.time_items`) and read its options.
        completed: whether all three phases reached their steps.
        memory: host RAM of the trainer and its workers over the three phases
            (`tfperf.probes.MemorySampler`: pages the workers share with the trainer counted
            once); None if not sampled.
        epoch_steps: the script's own epoch, where its loop started the loader again before
            a pass ended (a `break` after N steps); None where it did not.
        built_anew: the loop that builds the loader anew for each pass (`train.py:16`),
            whose workers no pass keeps; None where it is built once.
        cycled: where the script hands the loader to `itertools.cycle`
            (`served.cycled_at`); None where it does not.
    """

    discovery: Discovery
    options: dict[str, int | bool | None]
    loader: Any
    completed: bool
    memory: MemoryPeak | None = None
    epoch_steps: int | None = None
    built_anew: str | None = None
    cycled: str | None = None


def run_script(
    path: str | Path,
    argv: Sequence[str] = (),
    overrides: Mapping[str, int | None] | None = None,
    *,
    steps: int,
    mode: ScriptMode,
    warmup: int = 2,
    threads: int | None = None,
    clock: Callable[[], float] = time.perf_counter,
    sync: Callable[[], None] | None = None,
) -> ScriptRun:
    """Runs the script at `path` with `argv`, its `DataLoader` calls overridden, and measures.

    Args:
        overrides: site name -> value (`DataLoader@train.py:40.num_workers`).
        steps: steps to measure after `warmup` (0 with `ScriptMode.DISCOVER`).
        threads: `torch.set_num_threads` for the run (the trainer's intra-op threads); None
            leaves torch's; restored afterwards.
        clock: seconds; injectable for tests.
        sync: waits for the device's queued work at each `next()`; None: CUDA's, once the
            script has used CUDA (without it, a step's GPU work would be clocked as the
            next wait).

    Raises:
        PipelineFileError: the script exited, or ended, before iterating a DataLoader of its
            own (not in DISCOVER mode); or an override names no call.
        PipelineRuntimeError: the script raised.
    """
    file = Path(path).resolve()
    shown = file.name
    timer = Timer(mode, warmup + steps, clock, sync or cuda_sync)
    with (
        _threads(threads),
        run_as_main(file, argv) as run,
        recording(file.parent, overrides) as recorder,
    ):
        with measuring(recorder, timer):
            _run(run, file, argv, timer)
        recorder.check_overrides(shown)
        if timer.loader is not None and mode is ScriptMode.LOADER_ONLY:
            iterate_alone(timer)
        timer.close()
    if timer.loader is None and mode is not ScriptMode.DISCOVER:
        raise PipelineFileError(_no_loop_message(shown, argv, recorder))
    return ScriptRun(
        mode=mode,
        discovery=recorder.discovery(timer.loader),
        options=_options(timer.loader),
        warmup=warmup,
        first_batch_s=timer.waits[0] if timer.waits else None,
        waits_s=tuple(timer.waits[warmup:]),
        computes_s=tuple(timer.computes[warmup:]),
        completed=mode is ScriptMode.DISCOVER or len(timer.computes) >= warmup + steps,
    )


def profile_script(
    path: str | Path,
    argv: Sequence[str],
    overrides: Mapping[str, int | None] | None,
    profiler: Profiler,
    *,
    steps: int,
    min_seconds: float = 0.0,
    threads: int | None = None,
    on_loader: Callable[[Any, str | None], None] | None = None,
    budget_s: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
    measure_pipeline: bool = True,
    measure_compute: bool = True,
) -> ScriptProfile:
    """Runs the script once and measures its three phases through the core's `profiler`.

    The first loader of the user's that the script iterates is measured: its loop gets the
    batches of `profiler.iterate(loader, phase=END_TO_END)` (epochs restart inside, so the
    script's own epoch loop never ends early), then, in the same loop, one batch of each
    shape it saw, as often as it came (`COMPUTE_ONLY`); then the script is stopped and the
    loader iterated alone (`PIPELINE_ONLY`). Call `profiler.result()` afterwards for the
    `ProfileResult`.

    Args:
        profiler: a `tfperf.Profiler`, entered (`with profiler:`), that records the phases.
        steps, min_seconds: each phase's measured steps and least seconds, as `profile`'s.
        threads: as `run_script`'s.
        on_loader: called with the measured loader before its first batch, and the loop
            that builds it anew for each pass, if any (to set `profiler.epoch` from its
            length and workers, say).
        budget_s: the whole run's time budget, the script's start-up included: the three
            phases share what the start-up left of it (`script_phase_s`); None: none.
        clock: seconds, for the start-up's length; injectable for tests.
        measure_pipeline, measure_compute: whether those phases run (`ProfileRequest`).

    Raises:
        PipelineFileError, PipelineRuntimeError: as `run_script`; the profiler's own errors
            (`EmptyDatasetError`, `InputPipelineError`) pass through unchanged.
    """
    file = Path(path).resolve()
    shown = file.name
    started = clock()
    session = Profiled(
        profiler,
        steps,
        min_seconds,
        on_loader or (lambda loader, anew: None),
        lambda: script_phase_s(budget_s, clock() - started),
        measure_pipeline=measure_pipeline,
        measure_compute=measure_compute,
    )
    with (
        _threads(threads),
        run_as_main(file, argv) as run,
        recording(file.parent, overrides) as recorder,
    ):
        try:
            with measuring(recorder, session):
                _run(run, file, argv, session)
            recorder.check_overrides(shown)
            session.finish(shown)
        finally:
            session.close()
    if session.loader is None:
        raise PipelineFileError(_no_loop_message(shown, argv, recorder))
    return ScriptProfile(
        discovery=recorder.discovery(session.loader),
        options=_options(session.loader),
        loader=session.loader,
        completed=session.completed,
        memory=session.memory.peak,
        epoch_steps=session.epoch_steps,
        built_anew=session.anew,
        cycled=session.cycled,
    )


def profile_script_pipeline(
    pipeline: PipelineFile,
    knobs: Knobs | None = None,
    *,
    steps: int = 100,
    min_seconds: float = 0.0,
    warmup: int | None = None,
    probes: Sequence[Probe] | None = None,
    progress: ProgressCallback | None = None,
    on_discovery: Callable[[Discovery], None] | None = None,
    epoch_for: Callable[[Any, str | None], EpochInfo | None] | None = None,
    budget_s: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
    measure_pipeline: bool = True,
    measure_compute: bool = True,
) -> tuple[ProfileResult, ScriptProfile]:
    """Profiles a training script (`PipelineKind.SCRIPT`) under `knobs`, as `profile` does a
    pipeline file: the framework's `profile` calls this for a script.

    `knobs.sites` override the `DataLoader` calls (`DataLoader@train.py:40.num_workers`), and
    `knobs.torch_threads`, where the knobs have it, sets the trainer's threads.

    Args:
        on_discovery: called with the measured loader's call sites once the run is over.
        epoch_for: the measured loader and the loop that builds it anew, if any -> a real
            epoch's length and what a restart repeats (its workers starting), for the
            profile's restart records.
        budget_s, clock: as `profile_script`'s: the budget bounds the script's start-up too.
        measure_pipeline, measure_compute: as `profile_script`'s.

    Returns:
        The `ProfileResult` of the core's profiler, and what the run found (`ScriptProfile`:
        the loader, its options, the host RAM of trainer and workers).
    """
    from tfperf.measure import Profiler

    knobs = knobs if knobs is not None else pipeline.baseline
    with Profiler(
        warmup=warmup,
        pipeline=pipeline.path.name,
        knobs=knobs,
        probes=probes,
        progress=progress,
    ) as profiler:

        def found_loader(loader: Any, anew: str | None) -> None:
            if epoch_for is not None:
                profiler.epoch = epoch_for(loader, anew)

        found = profile_script(
            pipeline.path,
            pipeline.argv,
            dict(knobs.sites),
            profiler,
            steps=steps,
            min_seconds=min_seconds,
            threads=getattr(knobs, THREADS_KNOB, None),
            on_loader=found_loader,
            budget_s=budget_s,
            clock=clock,
            measure_pipeline=measure_pipeline,
            measure_compute=measure_compute,
        )
    if on_discovery is not None:
        on_discovery(found.discovery)
    result = profiler.result()
    result.budget_s = budget_s
    return result, found


def _run(run: Callable[[], None], file: Path, argv: Sequence[str], timer: Timer | Profiled) -> None:
    """`run()`, the script's code; its errors in tfperf's words."""
    shown = file.name
    try:
        run()
    except Stop:
        return
    except InStep:
        raise PipelineFileError(_in_step_message(shown)) from None
    except TfperfError:
        raise  # the profiler's own errors say what failed and where
    except SystemExit as error:
        if timer.loader is None:
            raise PipelineFileError(_exit_message(shown, error, argv)) from None
    except Exception as error:
        frames = format_frames(exception_user_frames(error, (file.parent,)))
        raise PipelineRuntimeError(
            f"{shown} raised {type(error).__name__} while tfperf ran it: {error}"
            + (f"\n{frames}" if frames else "")
        ) from error


def _options(loader: Any) -> dict[str, int | bool | None]:
    if loader is None:
        return {}
    return {name: getattr(loader, name, None) for name in _OPTIONS}


@contextlib.contextmanager
def _threads(threads: int | None) -> Iterator[None]:
    if threads is None:
        yield
        return
    import torch

    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


def _in_step_message(shown: str) -> str:
    return (
        f"{shown}'s training loop reads two DataLoaders in step, as `zip(a, b)` does: tfperf "
        "serves a loop one loader, and the other's batches would be timed as the model's, so "
        "it stopped the script. Make one Dataset whose items hold both (its `__getitem__` "
        "returning `(a[i], b[i])`) and loop over one DataLoader of it: it is then measured and "
        "tuned as one."
    )


def _exit_message(shown: str, error: SystemExit, argv: Sequence[str]) -> str:
    return (
        f"{shown} called sys.exit({error.code!r}) before its training loop iterated a "
        f"DataLoader, so tfperf had no loop to measure. tfperf runs the script as `python "
        f"{shown}{''.join(' ' + arg for arg in argv)}`; a script that exits first (argparse "
        "rejecting an argument or printing --help, a failed check) never gets there. Pass the "
        f"script's own arguments after `--`: `tfperf profile {shown} -- --epochs 3`."
    )


def _no_loop_message(shown: str, argv: Sequence[str], recorder: LoaderRecorder) -> str:
    made_elsewhere = [item.describe() for item in recorder.discovery().untunable]
    found = f" DataLoaders seen: {'; '.join(made_elsewhere)}." if made_elsewhere else ""
    return (
        f"{shown} ran to its end without iterating a DataLoader that its own code made or "
        f"called a library to make, so tfperf had no training loop to measure. tfperf runs "
        f"the script as `python {shown}{''.join(' ' + arg for arg in argv)}` and clocks the "
        "first such loader the script iterates: check that it trains when run this way (not "
        "only under a flag), or write a pipeline file with `make_loader()` and "
        f"`make_train_step()` (see docs/pytorch.md).{found}"
    )
