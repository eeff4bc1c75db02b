"""Entry point of the `tfperf` command: parses arguments, runs a subcommand, reports errors.

Errors meant for the user (`TfperfError`) are printed as one message without a traceback and
exit non-zero: 2 for bad input (flags, the pipeline file, an output path, a storage that cannot be
used), 1 when the pipeline failed while running, 3 when the tf.data service failed (a worker
died, the dispatcher is unreachable or went away, a port is in use), 130 on Ctrl-C and 143 on
SIGTERM. Anything else
is a bug in tfperf: "internal error", exit 1. `--debug` shows full tracebacks and TensorFlow's own
logging.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import warnings
from collections.abc import Sequence

from tfperf.cli.base import Command
from tfperf.cli.lifecycle import (
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    finish,
    handle_sigterm,
    interrupted_status,
    reap_orphans,
)
from tfperf.cli.offload import EXIT_SERVICE, OffloadCommand
from tfperf.cli.profile import ProfileCommand
from tfperf.cli.report import ReportCommand
from tfperf.cli.tune import TuneCommand
from tfperf.errors import (
    FlagError,
    KnobError,
    OutputPathError,
    PipelineFileError,
    ResultFileError,
    ServiceAddressError,
    ServiceError,
    TfperfError,
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_TERMINATED",
    "EXIT_USAGE",
    "build_parser",
    "main",
    "split_script_args",
]
#: Terminal colour and cursor codes (Keras writes them into its messages).
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

COMMANDS: tuple[Command, ...] = (ProfileCommand(), TuneCommand(), ReportCommand())
COMMANDS += (OffloadCommand(),)


def _usage_errors() -> tuple[type[TfperfError], ...]:
    # Imported here, not at the top: storage and study pull in nothing heavy until used, but
    # keep `tfperf --help` independent of them.
    from tfperf.study import StudyMismatchError
    from tfperf.study.storage import StorageError

    return (
        PipelineFileError,
        KnobError,
        FlagError,
        ResultFileError,
        OutputPathError,
        ServiceAddressError,
        StorageError,
        StudyMismatchError,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tfperf",
        description="Profile and tune ML input pipelines (tf.data, PyTorch's DataLoader): "
        "find out whether training waits for data, and measure which configuration is fastest.",
        epilog="Run `tfperf COMMAND --help` for the options of each command.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    parser.add_argument(
        "--debug",
        action="store_true",
        help="show full tracebacks and TensorFlow's log messages",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        sub = subparsers.add_parser(
            command.name, help=command.help, description=command.description
        )
        sub.add_argument(
            "--debug",
            action="store_true",
            default=argparse.SUPPRESS,
            help="show full tracebacks and TensorFlow's log messages",
        )
        command.add_arguments(sub)
        sub.set_defaults(handler=command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs `tfperf ARGV`; returns the exit status.

    Called without `argv` (as the `tfperf` command), it owns the process: it adopts what the
    pipeline's processes orphan, and at the end stops what the pipeline left running (see
    `tfperf.cli.lifecycle.finish`).
    """
    owns_process = argv is None
    own, script_args = split_script_args(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(own)
    args.script_args = script_args
    _configure_logging(args.debug)
    if owns_process:
        reap_orphans()
    with handle_sigterm():
        status = _run(args)
    return finish(status) if owns_process else status


def _run(args: argparse.Namespace) -> int:
    try:
        return int(args.handler.run(args))
    except _usage_errors() as error:
        return _fail(error, args, EXIT_USAGE)
    except ServiceError as error:
        return _fail(error, args, EXIT_SERVICE)
    except TfperfError as error:
        return _fail(error, args, EXIT_FAILED)
    except KeyboardInterrupt:
        status = interrupted_status()
        what = "terminated (SIGTERM)" if status == EXIT_TERMINATED else "interrupted"
        print(f"tfperf: {what}.", file=sys.stderr)
        return status
    except Exception as error:
        if args.debug:
            raise
        print(
            f"tfperf: internal error: {type(error).__name__}: {error}\n"
            "Run again with --debug for the traceback, and please report it.",
            file=sys.stderr,
        )
        return EXIT_FAILED


def split_script_args(argv: Sequence[str]) -> tuple[list[str], tuple[str, ...]]:
    """tfperf's own arguments, and those after the first `--`, which go to the user's script.

    Split before argparse sees them: argparse cannot tell a positional list after options
    (`train.py --steps 5 -- --epochs 3`) from its own arguments.
    """
    items = list(argv)
    if "--" not in items:
        return items, ()
    cut = items.index("--")
    return items[:cut], tuple(items[cut + 1 :])


def _fail(error: TfperfError, args: argparse.Namespace, status: int) -> int:
    if args.debug:
        raise error
    text = str(error) if sys.stderr.isatty() else _ANSI.sub("", str(error))
    print(f"tfperf: error: {text}", file=sys.stderr)
    return status


def _configure_logging(debug: bool) -> None:
    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING, format="%(message)s")
    if not debug:
        # TensorFlow's C++ and Python log lines would bury the summary; --debug brings them back.
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        os.environ.setdefault("ABSL_MIN_LOG_LEVEL", "3")
        warnings.filterwarnings("ignore", module=r"(tensorflow|keras)(\..*)?")
        logging.getLogger("tensorflow").setLevel(logging.ERROR)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tfperf")
    except PackageNotFoundError:
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
