"""Errors tfperf raises on purpose, each carrying a message meant for the person at the keyboard.

The CLI prints `str(error)` of any `TfperfError` without a traceback (unless `--debug`), so
every message names the file or value at fault and the likely fix.
"""

from __future__ import annotations


class TfperfError(Exception):
    """Base of every error whose message is written for the user."""


class KnobError(TfperfError, ValueError):
    """A knob name is unknown or a knob value has the wrong type or range."""


class PipelineFileError(TfperfError):
    """The pipeline file cannot be used: missing, not Python, broken, or breaks the contract."""


class PipelineRuntimeError(TfperfError):
    """The user's dataset, model or train step failed while tfperf ran it."""


class EmptyDatasetError(PipelineRuntimeError):
    """The dataset produced no element, so there is nothing to measure."""


class InputPipelineError(PipelineRuntimeError):
    """The dataset raised while producing a batch; the original error is `__cause__`."""

    def __init__(self, message: str, step: int) -> None:
        super().__init__(message)
        self.step = step


class ConfigurationRefused(PipelineRuntimeError):
    """The input framework refused the configuration's arguments while the dataset was built.

    tf.data checks some arguments against each other when a dataset is made (an interleave's
    `num_parallel_calls` above a fixed `cycle_length`): the configuration cannot run, while
    others of the same pipeline can, so a search prunes it instead of counting a failure.
    """


class TrainStepError(PipelineRuntimeError):
    """The train step raised on a batch; the original error is `__cause__`."""

    def __init__(self, message: str, step: int) -> None:
        super().__init__(message)
        self.step = step


class ResultFileError(TfperfError):
    """A saved result file cannot be read back."""


class OutputPathError(TfperfError):
    """An output path (`--json`, `--html`, `--write-patch`, a default report) cannot be written."""


class ServiceError(TfperfError):
    """The tf.data service failed under tfperf: its dispatcher cannot be reached or went away,
    a worker died, or a port it needs is in use. The CLI exits with status 3."""


class ServiceAddressError(TfperfError):
    """`--service` names an address where something other than a tf.data service dispatcher
    answers: a wrong flag, not a service that failed, so the CLI exits with status 2."""


class FlagError(TfperfError):
    """Command-line flags that each parse but cannot hold together (a `--step-time` no
    `--budget` window can fit); the CLI exits with status 2."""
