"""Runs one tuning trial in a child process, so that whatever goes wrong stays in that trial.

Every trial runs `python -m tfperf.trials._worker` (see `tfperf.trials._worker` for the protocol)
in a session of its own, forked from a zygote that imported the framework once while
`forked_trials` is in force (`tfperf.trials._zygote`): a TensorFlow runtime of its own with the
trial's precision policy set before its model, memory figures that are the trial's alone, and a
crash, hang or out-of-memory kill that takes down only the child. The parent watches the child's
process tree every `poll_interval_s` (its host RAM counted with shared pages once: the child's
RSS plus its own children's private pages, see `tfperf.probes.UniqueMemoryReader`, so a
DataLoader's forked workers are not charged again for the trainer's pages they share); over a
budget, past the timeout, or when `on_progress` asks to prune, it kills the whole process group
with SIGKILL and records why. A Ctrl-C in the terminal does not
reach the child (it leads its own session); the parent kills it on the way out instead. POSIX only:
it relies on process groups.

Example:
    >>> outcome = run_trial(
    ...     TrialRequest(Path("pipeline.py"), Knobs(batch_size=64), steps=50),
    ...     Budgets(ram_bytes=8 * 2**30, timeout_s=600),
    ... )  # doctest: +SKIP
    >>> outcome.status  # doctest: +SKIP
    <TrialStatus.RAM_BUDGET: 'ram-budget'>
    >>> outcome.reason  # doctest: +SKIP
    "used 8.2 GiB of host RAM (the trial's resident pages and ...), over the 8 GiB budget ..."
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any, Protocol

from tfperf.errors import ResultFileError
from tfperf.frameworks import DeviceLayout, ProfileOptions
from tfperf.kept import put_back
from tfperf.knobs import Knobs
from tfperf.measure import Progress
from tfperf.probes import NvmlProbe, UniqueMemoryReader
from tfperf.results import ProfileResult, TrialOutcome, TrialStatus
from tfperf.results.discovery import Discovery
from tfperf.trials._evidence import (
    FOLDER_PREFIX,
    oom_kill_count,
    oom_since,
    reap_stale_folders,
)
from tfperf.trials._oom import NO_GPU_LIMITS, GpuLimits, gpu_oom_reason, is_gpu_oom
from tfperf.trials._worker import (
    EXIT_FAILED,
    EXIT_FATAL,
    EXIT_OK,
    KEPT,
    REFUSED_KIND,
    WorkRequest,
    decode_message,
    progress_from_message,
)
from tfperf.trials._zygote import ZygoteLost, active
from tfperf.units import format_bytes

logger = logging.getLogger(__name__)

#: The options of `tfperf tune` that set each budget, named in reasons so users know the fix.
RAM_BUDGET_OPTION = "--ram-budget"
GPU_BUDGET_OPTION = "--gpu-memory-budget"
TIMEOUT_OPTION = "--trial-timeout"

_READER_JOIN_S = 5.0
_LOG_TAIL_LINES = 10
_LOG_TAIL_BYTES = 64 * 1024

ProgressHook = Callable[[Progress], bool | None]


class Child(Protocol):
    """A trial's worker process as the runner follows it: a `subprocess.Popen`, or one the
    zygote forked (`tfperf.trials._zygote.ForkedChild`)."""

    @property
    def pid(self) -> int: ...

    @property
    def stdout(self) -> IO[str] | None: ...

    @property
    def returncode(self) -> int | Any: ...

    def wait(self, timeout: float | None = None) -> int: ...


@dataclasses.dataclass(frozen=True)
class TrialRequest(ProfileOptions):
    """One configuration to measure, and how (its `ProfileOptions`).

    `argv` is what the pipeline file sees in `sys.argv[1:]`; `layout` the child's logical
    devices (CPU replicas, a GPU memory limit or growth); `training` the training settings whose
    model-alone rate the child also measures (issue 12's probe).
    """

    pipeline: Path
    knobs: Knobs
    argv: tuple[str, ...] = ()
    layout: DeviceLayout = dataclasses.field(default_factory=DeviceLayout)
    training: tuple[Mapping[str, Any], ...] = ()


@dataclasses.dataclass(frozen=True)
class Budgets:
    """Limits a trial is killed for crossing; None means no limit.

    `ram_bytes`: host RAM of the child's whole process tree, shared pages once: the child's
    resident memory plus each of its descendants' private pages (bytes). A DataLoader's
    workers share the trainer's pages copy-on-write; those count once, in the trainer.
    `gpu_memory_bytes`: GPU memory NVML attributes to the child's tree, the sum over GPUs of
    each GPU's peak (bytes); enforced only where `gpu_budget_problem()` returns None.
    `timeout_s`: wall-clock seconds from the child's start, TensorFlow's import included.
    `stall_s`: wall-clock seconds without any message from the child (a progress report, a
    discovery), counted from its start: a guard against no progress at all, not a time limit.
    """

    ram_bytes: int | None = None
    gpu_memory_bytes: int | None = None
    timeout_s: float | None = None
    stall_s: float | None = None


@dataclasses.dataclass(frozen=True)
class _Stop:
    """Why the parent killed the child."""

    status: TrialStatus
    reason: str


def run_trial(
    request: TrialRequest,
    budgets: Budgets,
    *,
    on_progress: ProgressHook | None = None,
    on_discovery: Callable[[Discovery], None] | None = None,
    poll_interval_s: float = 0.1,
    python: str = sys.executable,
) -> TrialOutcome:
    """Measures `request` in a child process, within `budgets`.

    Args:
        on_progress: called in this thread with each progress report the child sends (about
            ten a second at most); returning False kills the trial as PRUNED.
        poll_interval_s: how often memory and the clock are checked.
        python: the interpreter that runs the child; it must be able to import tfperf.

    Returns:
        The outcome: every failure of the trial is a status and a reason, never an exception.

    Raises:
        KeyboardInterrupt: (or any exception from `on_progress`) after the child's process
            group has been killed; the trial counts as interrupted, not measured.
    """
    if poll_interval_s <= 0:
        raise ValueError(f"`poll_interval_s > 0` must hold, but got {poll_interval_s}")
    reap_stale_folders()
    oom_before = oom_kill_count()
    with tempfile.TemporaryDirectory(prefix=f"{FOLDER_PREFIX}{os.getpid()}-") as folder:
        files = TrialFiles(Path(folder))
        work = WorkRequest(
            pipeline=str(request.pipeline),
            knobs=request.knobs.to_dict(),
            result_path=str(files.result),
            argv=request.argv,
            layout=request.layout,
            training=[dict(setting) for setting in request.training],
            **request.options(),
        )
        started = time.monotonic()
        child = _start(python, files, work)
        watch: _Watch | None = None
        try:
            watch = _Watch(child, budgets, on_progress, started, on_discovery)
            stop = watch.run(poll_interval_s)
        finally:
            kill_group(child)
            put_back(files.kept)  # a killed child's changes to the user's files
            if watch is not None:
                watch.close()
        wall_s = time.monotonic() - started
        assert watch is not None  # set, or the try above raised
        # Reports that arrived as the child finished still reach the caller (a progress bar's
        # last step); too late to prune, so their answers are ignored.
        watch.drain(deliver=stop is None)
        oom = oom_since(oom_before) if stop is None and child.returncode < 0 else None
        limits = GpuLimits(request.layout.gpu_memory_limit_mib, budgets.gpu_memory_bytes)
        return _outcome(stop, child.returncode, watch, files, wall_s, oom, limits)


def gpu_budget_problem() -> str | None:
    """Why a GPU memory budget cannot be enforced on this machine; None when it can.

    Per-trial GPU memory is read through NVML; without the driver, a GPU or `pynvml` it is not.

    >>> gpu_budget_problem()  # doctest: +SKIP
    'NVML could not start (NVML Shared Library Not Found): no NVIDIA driver on this machine'
    """
    probe = NvmlProbe()
    reason = probe.open()
    probe.close()
    return reason


def classify_exit(
    returncode: int,
    error: Mapping[str, Any] | None,
    log_tail: str,
    oom_killed: bool | None = None,
    gpu_limits: GpuLimits = NO_GPU_LIMITS,
) -> tuple[TrialStatus, str]:
    """Status and reason of a child that ended on its own (not killed by the parent).

    `error` is the error message the child sent, if any; `log_tail` the end of its stderr;
    `oom_killed` whether the kernel counted an out-of-memory kill meanwhile (None: unknown).
    `gpu_limits`: the GPU memory limit and budget the trial ran under; with either, TensorFlow
    running out of memory is the configuration not fitting: GPU_BUDGET, not FAILED.
    """
    if returncode == EXIT_OK:
        return TrialStatus.COMPLETE, ""
    if returncode == EXIT_FAILED and error is not None and error.get("kind") == REFUSED_KIND:
        # tf.data refused the configuration's arguments: pruned with the reason, so a search
        # learns to avoid it and never counts it toward its run of failures.
        return TrialStatus.PRUNED, str(error.get("message") or "tf.data refused it")
    if returncode == EXIT_FAILED and error is not None and is_gpu_oom(error, gpu_limits):
        return TrialStatus.GPU_BUDGET, gpu_oom_reason(error, gpu_limits)
    if returncode in (EXIT_FAILED, EXIT_FATAL):
        status = TrialStatus.FATAL if returncode == EXIT_FATAL else TrialStatus.FAILED
        message = error.get("message") if error is not None else None
        if isinstance(message, str) and message:
            return status, message
        return status, f"the trial exited with status {returncode} without a message" + _tail(
            log_tail
        )
    if returncode < 0:
        return TrialStatus.CRASHED, signal_reason(-returncode, log_tail, oom_killed)
    return TrialStatus.CRASHED, f"the trial exited with status {returncode}" + _tail(log_tail)


def signal_reason(signum: int, log_tail: str = "", oom_killed: bool | None = None) -> str:
    """Why a child killed by signal `signum` (that the parent did not send) died.

    For SIGKILL, `oom_killed` is the kernel's evidence (`oom_kill_count` rose while the child
    ran): True blames the out-of-memory killer, False says it was not one, None (no counter
    readable) says both are possible.
    """
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    if signum != signal.SIGKILL:
        return f"killed by {name}" + _tail(log_tail)
    fix = f"Set {RAM_BUDGET_OPTION} below the free memory so tfperf stops such trials itself."
    if oom_killed is True:
        return (
            f"killed by {name} from the kernel's out-of-memory killer (the kernel counted an "
            f"OOM kill while it ran): the machine ran out of memory. {fix}"
        )
    if oom_killed is False:
        return (
            f"killed by {name} from outside tfperf, not for lack of memory (the kernel counted "
            "no out-of-memory kill while it ran): a user, a script or a scheduler stopped it"
        )
    return (
        f"killed by {name}, by another process or the kernel's out-of-memory killer (no OOM "
        f"counter was readable here to tell which). If memory ran out: {fix}"
    )


def ram_reason(used_bytes: int, budget_bytes: int) -> str:
    return (
        f"used {format_bytes(used_bytes)} of host RAM (the trial's resident pages and its "
        f"subprocesses' private ones: shared pages once), over the {format_bytes(budget_bytes)} "
        f"budget ({RAM_BUDGET_OPTION})"
    )


def gpu_reason(used_bytes: int, budget_bytes: int) -> str:
    return (
        f"used {format_bytes(used_bytes)} of GPU memory, over the {format_bytes(budget_bytes)} "
        f"budget ({GPU_BUDGET_OPTION})"
    )


def timeout_reason(timeout_s: float) -> str:
    return f"still running after {timeout_s:g} s ({TIMEOUT_OPTION})"


def stall_reason(stall_s: float) -> str:
    """The reason of a trial stopped by `Budgets.stall_s`."""
    return f"no progress for {stall_s:g} s"


def pruned_reason(progress: Progress) -> str:
    phase = progress.phase.value.replace("_", "-")
    if progress.warming_up or progress.examples_per_sec is None:
        return f"pruned while warming up ({phase} phase)"
    steps = progress.measured_steps
    return (
        f"pruned at {progress.examples_per_sec:,.0f} examples/s after {steps} measured "
        f"step{'' if steps == 1 else 's'} ({phase} phase)"
    )


@dataclasses.dataclass(frozen=True)
class TrialFiles:
    """The folder of one worker: its request, its result and its stderr log."""

    folder: Path

    @property
    def request(self) -> Path:
        return self.folder / "request.json"

    @property
    def result(self) -> Path:
        return self.folder / "result.json"

    @property
    def log(self) -> Path:
        return self.folder / "worker.log"

    @property
    def kept(self) -> Path:
        return self.folder / KEPT


@dataclasses.dataclass(eq=False)
class _Watch:
    """Follows one running child: its messages, its tree's memory, the clock."""

    child: Child
    budgets: Budgets
    on_progress: ProgressHook | None
    started: float
    on_discovery: Callable[[Discovery], None] | None = None
    peak_rss: int = dataclasses.field(default=0, init=False)
    peak_gpu: int | None = dataclasses.field(default=None, init=False)
    error: dict[str, Any] | None = dataclasses.field(default=None, init=False)

    def __post_init__(self) -> None:
        self.last_message = self.started
        self._messages: queue.Queue[dict[str, Any]] = queue.Queue()
        pid, stdout = self.child.pid, self.child.stdout
        assert stdout is not None
        self._reader = threading.Thread(
            target=_read_protocol,
            args=(stdout, self._messages),
            name=f"tfperf-trial-{pid}",
            daemon=True,
        )
        self._reader.start()
        self._tree = UniqueMemoryReader(pid)
        self._gpu = _gpu_probe(pid) if self.budgets.gpu_memory_bytes is not None else None

    def run(self, poll_interval_s: float) -> _Stop | None:
        """Watches until the child exits (None) or must be stopped (why)."""
        while True:
            stop = self.drain(deliver=True) or self._check_limits()
            if stop is not None:
                return stop
            try:
                self.child.wait(timeout=poll_interval_s)
            except subprocess.TimeoutExpired:
                continue
            return None

    def drain(self, *, deliver: bool) -> _Stop | None:
        """Handles the queued messages; returns a stop when `on_progress` asks to prune."""
        while True:
            try:
                message = self._messages.get_nowait()
            except queue.Empty:
                return None
            self.last_message = time.monotonic()
            if message["type"] == "error":
                self.error = message
            elif message["type"] == "discovery" and self.on_discovery is not None:
                self.on_discovery(Discovery.from_dict(message.get("discovery")))
            elif message["type"] == "progress" and deliver and self.on_progress is not None:
                progress = progress_from_message(message)
                # `is False`: a display callback returning None must not prune.
                if progress is not None and self.on_progress(progress) is False:
                    return _Stop(TrialStatus.PRUNED, pruned_reason(progress))

    def close(self) -> None:
        """After the child's group is dead: lets the reader finish, releases NVML."""
        self._reader.join(_READER_JOIN_S)
        if self._reader.is_alive():
            logger.warning("the output of trial process %d did not close", self.child.pid)
        elif self.child.stdout is not None:
            self.child.stdout.close()
        if self._gpu is not None:
            self._gpu.close()

    def _check_limits(self) -> _Stop | None:
        elapsed = time.monotonic() - self.started
        budgets = self.budgets
        if budgets.timeout_s is not None and elapsed > budgets.timeout_s:
            return _Stop(TrialStatus.TIMEOUT, timeout_reason(budgets.timeout_s))
        if budgets.stall_s is not None and time.monotonic() - self.last_message > budgets.stall_s:
            return _Stop(TrialStatus.TIMEOUT, stall_reason(budgets.stall_s))
        used = self._tree.read()
        if used is not None:
            self.peak_rss = max(self.peak_rss, used)
            if budgets.ram_bytes is not None and used > budgets.ram_bytes:
                return _Stop(TrialStatus.RAM_BUDGET, ram_reason(used, budgets.ram_bytes))
        if self._gpu is not None and budgets.gpu_memory_bytes is not None:
            gpu = _gpu_peak(self._gpu, elapsed)
            if gpu is not None:
                self.peak_gpu = gpu
                if gpu > budgets.gpu_memory_bytes:
                    return _Stop(TrialStatus.GPU_BUDGET, gpu_reason(gpu, budgets.gpu_memory_bytes))
        return None


def _gpu_probe(pid: int) -> NvmlProbe | None:
    probe = NvmlProbe(pid=pid)
    reason = probe.open()
    if reason is not None:
        logger.warning("the GPU memory budget is not enforced: %s", reason)
        return None
    return probe


def _gpu_peak(probe: NvmlProbe, t_s: float) -> int | None:
    """GPU memory of the child's tree: each GPU's peak so far, summed; None if never reported."""
    probe.sample(t_s)
    peaks = [gpu.process_memory_peak_bytes for gpu in probe.gpus()]
    reported = [peak for peak in peaks if peak is not None]
    return sum(reported) if reported else None


def _start(python: str, files: TrialFiles, request: WorkRequest) -> Child:
    """The trial's worker: forked by the zygote of the `forked_trials` in force, else (and
    when that zygote is lost) a fresh interpreter (`start_worker`)."""
    zygote = active(python)
    if zygote is not None:
        try:
            return zygote.start(files, request)
        except ZygoteLost as lost:
            logger.warning("starting this trial afresh: %s", lost)
    return start_worker(python, files, request)


def start_worker(python: str, files: TrialFiles, request: WorkRequest) -> subprocess.Popen[str]:
    """Writes `request` to `files` and starts `python -m tfperf.trials._worker` on it, in a
    session of its own, its stderr in the log."""
    files.request.write_text(json.dumps(request.to_dict()), encoding="utf-8")
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    command = [python, "-m", "tfperf.trials._worker", str(files.request)]
    logger.debug("starting trial: %s", " ".join(command))
    with files.log.open("wb") as log:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            env=env,
            # Its own session: a terminal's Ctrl-C does not reach it, and killpg reaches
            # everything it started.
            start_new_session=True,
            text=True,
            encoding="utf-8",
            errors="replace",
        )


def _read_protocol(stream: IO[str], messages: queue.Queue[dict[str, Any]]) -> None:
    for line in stream:
        message = decode_message(line.rstrip("\n"))
        if message is None:
            logger.debug("trial output that is not a protocol line: %r", line)
        else:
            messages.put(message)


def kill_group(child: Child) -> None:
    """SIGKILLs the child's process group, then reaps the child.

    Also after a normal exit: processes the pipeline started and left running die with it.
    """
    # ProcessLookupError: the group is gone, the child exited and left nothing behind.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGKILL)
    # A forked child leads its group only once it has called setsid(): before, only itself.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(child.pid, signal.SIGKILL)
    child.wait()


def _outcome(
    stop: _Stop | None,
    returncode: int,
    watch: _Watch,
    files: TrialFiles,
    wall_s: float,
    oom_killed: bool | None = None,
    gpu_limits: GpuLimits = NO_GPU_LIMITS,
) -> TrialOutcome:
    result = None
    if stop is not None:
        status, reason = stop.status, stop.reason
    else:
        tail = log_tail(files.log)
        status, reason = classify_exit(returncode, watch.error, tail, oom_killed, gpu_limits)
    if status is TrialStatus.COMPLETE:
        try:
            result = ProfileResult.load(files.result)
        except ResultFileError as error:
            status, reason = TrialStatus.CRASHED, f"the trial finished but left no result: {error}"
    if status is not TrialStatus.COMPLETE:
        logger.debug("trial %s: %s\nits log ends:\n%s", status.value, reason, log_tail(files.log))
    return TrialOutcome(
        status=status,
        result=result,
        reason=reason,
        peak_rss_bytes=watch.peak_rss,
        peak_gpu_bytes=watch.peak_gpu,
        wall_s=wall_s,
    )


def log_tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    """The last non-empty `lines` of the child's stderr log; "" when there is none."""
    try:
        with path.open("rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - _LOG_TAIL_BYTES))
            text = log.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    kept = [line for line in text.splitlines() if line.strip()]
    return "\n".join(kept[-lines:])


def _tail(log_tail: str) -> str:
    return f"; its output ended with:\n{log_tail}" if log_tail else " (it wrote nothing to stderr)"
