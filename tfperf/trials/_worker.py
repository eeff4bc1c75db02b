"""The child process of one tuning trial: `python -m tfperf.trials._worker REQUEST.json`.

`tfperf.trials._runner` starts this module in a process of its own for every trial (a fresh
interpreter, or a fork of the tuner's zygote, `tfperf.trials._zygote`, which calls `main`), so
each trial gets a TensorFlow runtime of its own (its precision policy set before the model
exists), peak memory that is its own, and a crash, hang or out-of-memory kill that takes down only
itself.

The request is a JSON object, `WorkRequest.to_dict()`: the pipeline file, its argv, the knob
values, the `ProfileOptions` and where to write the result. The worker loads the pipeline,
profiles it through its framework (those options, `owns_process=True`) and writes the
`ProfileResult` JSON to `result_path` through a temporary file and `os.replace`, so a
half-written result never exists. A file of the user's that the run changes is put back when
it ends (`tfperf.kept`), its copy kept in the trial's folder (`kept_folder`) meanwhile.
With `mode` "discover" it only builds the pipeline of a plain file or script and writes the
call sites it found (`Discovery` JSON) instead (see `tfperf.trials._discovery`).

It talks to its parent on stdout, one JSON object per line, each line starting with
`PROTOCOL_PREFIX`; the parent ignores every other line. The real stdout is kept for these lines
alone: file descriptor 1 and `sys.stdout` point at stderr, so the user's `print()` calls land in
the trial's log instead of the protocol. Messages:

- `{"type": "progress", "phase": "end_to_end", "warming_up": false, "measured_steps": 10,
  "target_steps": 100, "examples_per_sec": 1234.5}`: at most ~10 a second, but always the first
  of each phase's warm-up and measurement and the last measured step of each phase.
- `{"type": "error", "kind": "fatal" | "failed", "error": "PipelineFileError", "message": ...}`:
  sent once, just before a non-zero exit; with `"out_of_memory": true` and the framework's
  name (`"framework": "tensorflow"`) added when the framework's out-of-memory error lies behind
  the error (a GPU limit or budget was hit; `Framework.out_of_memory`).
- `{"type": "discovery", "discovery": {...}}`: the call sites of a plain file or a script
  (`Discovery.to_dict()`), once, when the profiled pipeline is built.

Exit status: 0 success (the result file exists); 2 (`kind` "fatal") when the pipeline file or
the knobs are broken, so every trial would fail the same way and the study must stop; 1
(`kind` "failed") for any other error, which fails this configuration only.
"""

from __future__ import annotations

import dataclasses
import faulthandler
import json
import logging
import os
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final, Literal

from tfperf.errors import ConfigurationRefused, KnobError, PipelineFileError, TfperfError
from tfperf.frameworks import DeviceLayout, ProfileOptions, ProfileRequest
from tfperf.kept import kept_files

if TYPE_CHECKING:
    from tfperf.frameworks import Framework
    from tfperf.knobs import Knobs
    from tfperf.measure import Progress
    from tfperf.results import ProfileResult
    from tfperf.results.discovery import Discovery

logger = logging.getLogger(__name__)

PROTOCOL_PREFIX = "@@tfperf "
#: The trial folder's subfolder holding copies of the user's files its run changed.
KEPT = "kept"
PROFILE: Final = "profile"
DISCOVER: Final = "discover"
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_FATAL = 2
#: The error message's kind when the framework refused the configuration's arguments
#: (`ConfigurationRefused`): the trial is pruned, not failed, since other configurations of the
#: same pipeline run. The status stays EXIT_FAILED: an exit status alone could come from
#: anything the child runs.
REFUSED_KIND = "refused"

#: Traceback lines sent for an exception tfperf did not expect (the lines nearest the error).
_TRACEBACK_LINES = 8
#: How often the worker checks that its parent is still alive.
_PARENT_CHECK_S = 1.0

Send = Callable[[Mapping[str, Any]], None]


class RequestError(TfperfError):
    """The request file cannot be read: a bug in whatever started the worker."""


@dataclasses.dataclass(frozen=True)
class WorkRequest(ProfileOptions):
    """What one worker measures, and how (its `ProfileOptions`); the JSON the parent writes and
    the worker reads.

    `knobs` holds plain knob values (`Knobs.to_dict()`). `mode` is "profile" (measure) or
    "discover" (find the call sites). With `analyse_stages`, each stage is also measured alone
    to name the limiting one: after the three phases of a profile (the stage analysis of
    `tfperf profile`), or after finding the sites. `layout` is set before the framework starts;
    `training` holds the training settings (`batch_size`, `mixed_precision` overrides) whose
    model-alone rate the profile also measures (`ProfileResult.training_rates`).
    """

    pipeline: str
    knobs: dict[str, Any]
    result_path: str
    argv: tuple[str, ...] = ()
    mode: Literal["profile", "discover"] = PROFILE
    layout: DeviceLayout = dataclasses.field(default_factory=DeviceLayout)
    training: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "argv": list(self.argv)}

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "the request") -> WorkRequest:
        """Checks a decoded request: its fields and their JSON types (strictly: "5" is no
        int), then `steps >= 1` and `warmup >= 0`.

        Raises:
            RequestError: a field is missing, has the wrong type or is out of range; the
                message names each such field and its value.
        """
        from tfperf.results import validated

        request = validated(cls, data, source=source, error=RequestError, strict=True)
        if request.steps < 1:
            raise RequestError(f"{source}: `steps >= 1` must hold, but got steps={request.steps}")
        if request.warmup is not None and request.warmup < 0:
            raise RequestError(
                f"{source}: `warmup >= 0` must hold, but got warmup={request.warmup}"
            )
        return request

    @classmethod
    def load(cls, path: Path) -> WorkRequest:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise RequestError(f"cannot read the request file {path}: {error}") from None
        return cls.from_dict(data, source=f"the request file {path}")


def encode_message(message: Mapping[str, Any]) -> str:
    """One protocol line (without its newline).

    >>> encode_message({"type": "error"})
    '@@tfperf {"type": "error"}'
    """
    return PROTOCOL_PREFIX + json.dumps(message)


def decode_message(line: str) -> dict[str, Any] | None:
    """The message on a protocol line; None for any other line (a user's print, say).

    >>> decode_message('@@tfperf {"type": "error"}')
    {'type': 'error'}
    >>> decode_message("loss: 0.3") is None
    True
    """
    if not line.startswith(PROTOCOL_PREFIX):
        return None
    try:
        message = json.loads(line[len(PROTOCOL_PREFIX) :])
    except ValueError:
        return None
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        return None
    return message


def progress_message(progress: Progress) -> dict[str, Any]:
    """The protocol message for one `Progress` report."""
    return {
        "type": "progress",
        "phase": progress.phase.value,
        "warming_up": progress.warming_up,
        "measured_steps": progress.measured_steps,
        "target_steps": progress.target_steps,
        "examples_per_sec": progress.examples_per_sec,
        "complete": progress.complete,
    }


def progress_from_message(message: Mapping[str, Any]) -> Progress | None:
    """The `Progress` in a progress message; None (logged) when it is malformed."""
    from tfperf.measure import Progress
    from tfperf.results import Phase

    try:
        rate = message["examples_per_sec"]
        target = message["target_steps"]
        return Progress(
            phase=Phase(message["phase"]),
            warming_up=bool(message["warming_up"]),
            measured_steps=int(message["measured_steps"]),
            target_steps=None if target is None else int(target),
            examples_per_sec=None if rate is None else float(rate),
            complete=bool(message["complete"]),
        )
    except (KeyError, TypeError, ValueError) as error:
        logger.warning(
            "ignoring a malformed progress message from a trial (%s): %r", error, message
        )
        return None


def error_message(error: BaseException) -> tuple[int, dict[str, Any]]:
    """The exit status and protocol message that report `error`.

    A broken pipeline file or knob (or request) is fatal: every trial would fail alike. Errors
    tfperf words for the user keep their message; anything else adds its traceback's last lines,
    since nobody has explained it yet.
    """
    fatal = isinstance(error, (PipelineFileError, KnobError, RequestError))
    refused = isinstance(error, ConfigurationRefused)
    if isinstance(error, SystemExit):
        text = f"the pipeline called sys.exit({error.code!r}) while tfperf ran it"
    elif isinstance(error, TfperfError):
        text = str(error)
    else:
        lines = "".join(traceback.format_exception(error)).rstrip().splitlines()
        text = "\n".join(lines[-_TRACEBACK_LINES:])
    message: dict[str, Any] = {
        "type": "error",
        "kind": "fatal" if fatal else REFUSED_KIND if refused else "failed",
        "error": type(error).__name__,
        "message": text,
    }
    ran_out = out_of_memory(error)
    if ran_out is not None:
        message.update(out_of_memory=True, framework=ran_out)
    return (EXIT_FATAL if fatal else EXIT_FAILED), message


def out_of_memory(error: BaseException) -> str | None:
    """The framework that ran out of device memory somewhere behind `error`
    (`Framework.out_of_memory`), by name; None where none did.

    tfperf rewords the errors of a train step or a pipeline, keeping the framework's as the
    cause, so the whole chain of causes is searched.
    """
    from tfperf import frameworks

    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        for name in frameworks.names():
            if frameworks.get(name).out_of_memory(current):
                return name
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def trial_layout(request: WorkRequest, knobs: Knobs) -> DeviceLayout:
    """The request's device layout, with the `gpu_memory_growth` knob where the layout (the
    command line) sets neither a GPU memory limit nor growth itself."""
    layout = request.layout
    chosen = knobs.gpu_memory_growth
    if chosen is None or layout.gpu_memory_limit_mib is not None:
        return layout
    if layout.gpu_memory_growth is not None:
        return layout
    return dataclasses.replace(layout, gpu_memory_growth=chosen)


class ProgressThrottle:
    """Picks which progress reports to send: at most one per `min_interval_s`.

    The first report of each stage (a phase's warm-up, its measurement, its first measured rate)
    and the last measured step of each phase always go, so the parent sees every stage start, the
    first rate it could prune on and every phase's final rate.
    """

    def __init__(
        self, min_interval_s: float = 0.1, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.min_interval_s = min_interval_s
        self.clock = clock
        self._stage: tuple[str, bool, bool] | None = None
        self._sent_at = -float("inf")

    def should_send(self, progress: Progress) -> bool:
        now = self.clock()
        # The first report with a measured rate is a stage of its own: a tuner prunes on it.
        stage = (progress.phase.value, progress.warming_up, progress.examples_per_sec is None)
        if stage != self._stage or progress.complete or now - self._sent_at >= self.min_interval_s:
            self._stage, self._sent_at = stage, now
            return True
        return False


def run(request_path: Path, send: Send) -> int:
    """Measures the request at `request_path`, reporting through `send`; returns the exit status.

    Never raises for a failure of the pipeline: every exception, `SystemExit` from user code
    included, becomes an error message and a non-zero status.
    """
    try:
        request = WorkRequest.load(request_path)
        if request.mode == DISCOVER:
            text = json.dumps(_discover(request).to_dict())
        else:
            text = _measure(request, send).to_json()
        _write_atomically(Path(request.result_path), text)
    except (Exception, SystemExit) as error:
        status, message = error_message(error)
        send(message)
        return status
    return EXIT_OK


def _measure(request: WorkRequest, send: Send) -> ProfileResult:
    from tfperf.knobs import Knobs

    # Knobs first: a bad value fails in milliseconds, before TensorFlow is imported.
    knobs = Knobs.from_mapping(request.knobs, source="the trial's knobs")
    from tfperf import frameworks

    framework = frameworks.detect(request.pipeline)
    framework.start(trial_layout(request, knobs))  # before anything touches a device
    with kept_files(framework.writers, kept_folder(request)):
        return _measure_loaded(request, framework, knobs, send)


def _measure_loaded(
    request: WorkRequest, framework: Framework, knobs: Knobs, send: Send
) -> ProfileResult:
    emulated = request.step_time_s is not None
    pipeline = framework.load(request.pipeline, request.argv, needs_step=not emulated)
    throttle = ProgressThrottle()

    def report(progress: Progress) -> None:
        if throttle.should_send(progress):
            send(progress_message(progress))

    def discovered(discovery: Discovery) -> None:
        send({"type": "discovery", "discovery": discovery.to_dict()})

    profiled = ProfileRequest(
        **request.options(), owns_process=True, progress=report, on_discovery=discovered
    )
    result = framework.profile(pipeline, knobs, profiled)
    # One device and a real model: the probe's form (an emulated step has no model to probe).
    if request.training and result.distribution is None and not emulated:
        result.training_rates = framework.probe_training(pipeline, knobs, request.training)
    return result


def _discover(request: WorkRequest) -> Discovery:
    from tfperf import frameworks

    framework = frameworks.detect(request.pipeline)
    framework.start(owns_process=True)  # a script builds its model: take only what it needs
    sites = framework.sites()
    if sites is None:
        raise PipelineFileError(
            f"{Path(request.pipeline).name}: tfperf cannot find the input calls of a "
            f"{framework.name} file; write a pipeline file that reads its knobs instead."
        )
    with kept_files(framework.writers, kept_folder(request)):
        # Finding the sites builds the input alone: a file without a model (for
        # `--step-time`) is found as well as any.
        pipeline = framework.load(request.pipeline, request.argv, needs_step=False)
        return sites.find(pipeline, measure_stages=request.analyse_stages)


def kept_folder(request: WorkRequest) -> Path:
    """Where the trial keeps copies of the user's files its run changes (`tfperf.kept`), in
    the trial's folder: its runner puts them back should the trial be killed."""
    return Path(request.result_path).parent / KEPT


def _write_atomically(path: Path, text: str) -> None:
    with tempfile.NamedTemporaryFile(
        "w", encoding="utf-8", dir=path.parent, prefix=f".{path.name}.", delete=False
    ) as handle:
        try:
            handle.write(text)
        except BaseException:
            handle.close()
            os.unlink(handle.name)
            raise
    os.replace(handle.name, path)


def _claim_stdout() -> IO[str]:
    """Keeps the real stdout for protocol lines; points fd 1 and `sys.stdout` at stderr.

    The kept descriptor is not inheritable, so processes the pipeline starts cannot hold the
    parent's pipe open after this process dies.
    """
    sys.stdout.flush()
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    return channel


def _sender(channel: IO[str]) -> Send:
    def send(message: Mapping[str, Any]) -> None:
        try:
            channel.write(encode_message(message) + "\n")
            channel.flush()
        except (BrokenPipeError, ValueError):
            # The parent is gone (or closed the pipe): nobody will read the result.
            os._exit(EXIT_FAILED)

    return send


def _exit_with_parent() -> None:
    """Exits when the parent dies, so a killed tuner leaves no trial running on as an orphan."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_PARENT_CHECK_S)
        os._exit(EXIT_FAILED)

    threading.Thread(target=watch, name="tfperf-parent-watch", daemon=True).start()


def main(argv: Sequence[str] | None = None) -> int:
    """The entry point: `python -m tfperf.trials._worker REQUEST.json`."""
    args = sys.argv[1:] if argv is None else list(argv)
    faulthandler.enable()  # a segfault in native code leaves a Python traceback in the log
    send = _sender(_claim_stdout())
    if len(args) != 1:
        send(error_message(RequestError("usage: python -m tfperf.trials._worker REQUEST.json"))[1])
        return EXIT_FATAL
    _exit_with_parent()
    return run(Path(args[0]), send)


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: the result is already on disk, and TensorFlow's threads (one
    # may be stuck in the user's code) can make a normal exit hang or crash.
    os._exit(status)
