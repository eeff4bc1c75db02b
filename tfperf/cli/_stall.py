"""`tfperf profile --stall-timeout S`: stop a measurement that makes no progress at all.

A measuring child reports progress after its steps (a few times a second while steps finish).
When nothing arrives for S seconds, the pipeline or the train step is blocked, not slow: a
mirrored step waiting for a replica that got no examples, a `numpy_function` that never
returns. The default is generous: TensorFlow's import and the first step's tracing on a loaded
machine take minutes at worst, and the guard counts silence, not total time, so a slow run that
keeps reporting is never stopped by it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from tfperf.cli.base import non_negative_seconds

#: What a stuck pipeline blocks in, in tf.data's words: a caller names its framework's own.
TF_DATA_INPUT = ("make_dataset()", "map or read")

if TYPE_CHECKING:
    from tfperf.measure import Progress

#: Seconds without a progress report before a profile is stopped as stuck.
DEFAULT_STALL_S = 900.0

OPTION = "--stall-timeout"


def add_stall_argument(parser: argparse.ArgumentParser) -> None:
    """Adds `--stall-timeout S` (default 900; 0 turns the guard off)."""
    parser.add_argument(
        OPTION,
        dest="stall_timeout",
        type=non_negative_seconds,
        default=DEFAULT_STALL_S,
        metavar="S",
        help="stop the measurement when no step finishes for S seconds and say which phase "
        "and step it waited on (default: %(default)g; 0: never). A slow run that keeps "
        "finishing steps is never stopped by it; --timeout limits the total time",
    )


def stall_limit(args: argparse.Namespace) -> float | None:
    """The stall guard in seconds for `Budgets(stall_s=...)`; None when it is off."""
    value = getattr(args, "stall_timeout", DEFAULT_STALL_S)
    return value if value else None


def stall_message(
    pipeline: Path,
    stall_s: float,
    last: Progress | None,
    input_words: tuple[str, str] = TF_DATA_INPUT,
) -> str:
    """Why a profile with no progress for `stall_s` was stopped, naming where it waited.

    `input_words` name the call that builds the input and its first work per element, in
    the framework's words (`Framework.input_function`, `Framework.words`).
    """
    call, first = input_words
    if last is None:
        where = (
            "no step ever finished: the pipeline is stuck before its first batch (in "
            f"{call} or its first {first}), or the first train step never returned (a "
            "mirrored step waits forever for a replica whose share of the batch is empty)"
        )
    else:
        phase = last.phase.value.replace("_", "-")
        if last.complete:
            where = f"the {phase} phase had finished, and the next phase or stage never did"
        elif last.warming_up:
            where = f"it was warming up in the {phase} phase and its next step never finished"
        else:
            where = (
                f"it was in the {phase} phase and step {last.measured_steps + 1} of the "
                "measured window never finished (its batch did not arrive or its train step "
                "did not return)"
            )
    return (
        f"{pipeline.name}: stopped after {stall_s:g} s without progress ({OPTION}): {where}. "
        f"Run the file's {call} alone to see where it blocks, or raise {OPTION} if a "
        "single step really takes that long."
    )
