"""Finds the call sites of a plain file or script in a child process, before a search starts.

A search needs the sites (and the values written at them) before its first trial: they are its
dimensions and its baseline. Finding them means running the user's code: a plain file's
`make_dataset()`, or a script up to `model.fit`, model included. That runs in a child process
(`python -m tfperf.trials._worker` in "discover" mode), like a trial, so the tuner's own process
holds no model, no GPU memory and no data of the user's, and a script that hangs or crashes stops
with a clear message instead of taking the tuner down.

Example:
    >>> pipeline = with_sites(load_pipeline("train.py", ["--epochs", "3"]))  # doctest: +SKIP
    >>> pipeline.baseline.sites  # doctest: +SKIP
    SiteValues({'batch@train.py:30.batch_size': 32, ...})
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from tfperf.errors import PipelineFileError, PipelineRuntimeError, TfperfError
from tfperf.pipeline import PipelineFile, PipelineKind
from tfperf.results import TrialStatus
from tfperf.results.discovery import Discovery
from tfperf.trials._runner import TrialFiles, classify_exit, kill_group, log_tail, start_worker
from tfperf.trials._worker import DISCOVER, WorkRequest, decode_message

#: Seconds the child may take: TensorFlow's import, the user's code up to `fit`.
DISCOVERY_TIMEOUT_S = 600.0


def with_sites(
    pipeline: PipelineFile,
    *,
    stages: bool = False,
    timeout_s: float = DISCOVERY_TIMEOUT_S,
    python: str = sys.executable,
) -> PipelineFile:
    """`pipeline` with its call sites found, their written values as its baseline's sites.

    With `stages`, each stage of the pipeline as written is also measured alone (a few
    seconds) to name the costliest (`Discovery.slowest`). A file that reads its knobs
    is returned as it is.

    Raises:
        PipelineFileError: the file or script breaks the contract (a script that never
            reaches `fit`, say).
        PipelineRuntimeError: the user's code raised, or the child crashed or timed out.
    """
    if pipeline.kind is PipelineKind.KNOBS:
        return pipeline
    return pipeline.with_discovery(discover_in_child(pipeline, stages, timeout_s, python))


def discover_in_child(
    pipeline: PipelineFile, stages: bool, timeout_s: float, python: str
) -> Discovery:
    """Runs the framework's call-site discovery on `pipeline` in a fresh interpreter."""
    with tempfile.TemporaryDirectory(prefix="tfperf-discover-") as folder:
        files = TrialFiles(Path(folder))
        request = WorkRequest(
            pipeline=str(pipeline.path),
            knobs=pipeline.baseline.replace(sites={}).to_dict(),
            result_path=str(files.result),
            argv=pipeline.argv,
            mode=DISCOVER,
            steps=1,
            analyse_stages=stages,
        )
        child = start_worker(python, files, request)
        returncode, output = _run(child, timeout_s, pipeline.path.name)
        errors = [m for m in map(decode_message, output.splitlines()) if m and m["type"] == "error"]
        status, reason = classify_exit(
            returncode, errors[-1] if errors else None, log_tail(files.log)
        )
        if status is TrialStatus.COMPLETE:
            return Discovery.from_dict(json.loads(files.result.read_text(encoding="utf-8")))
    raise _error(status, reason, pipeline.path.name)


def _run(child: subprocess.Popen[str], timeout_s: float, shown: str) -> tuple[int, str]:
    """The child's exit status and protocol output; killed with whatever the script started
    (its process group) when it runs past `timeout_s` or this process is interrupted."""
    try:
        output, _ = child.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill(child)
        raise PipelineRuntimeError(
            f"{shown} was still building its dataset after {timeout_s:g} s while tfperf looked "
            "for its call sites. Check that it gets there with these arguments (a script may "
            "be waiting for input or loading far more data than a profile needs)."
        ) from None
    except BaseException:
        _kill(child)
        raise
    return child.returncode, output


def _kill(child: subprocess.Popen[str]) -> None:
    kill_group(child)
    child.communicate()


def _error(status: TrialStatus, reason: str, shown: str) -> TfperfError:
    if status is TrialStatus.FATAL:
        return PipelineFileError(reason)
    if status is TrialStatus.FAILED:
        return PipelineRuntimeError(reason)
    return PipelineRuntimeError(f"{shown}: finding its call sites failed: {reason}")
