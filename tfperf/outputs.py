"""Writing tfperf's output files (reports, JSON, patches) without clobbering what is not ours.

Every file tfperf writes goes through `write_text`: a temporary file beside the target, then
`os.replace`, so a reader never sees half a file. Before that, `check_output_path` refuses a path
that is not a place for a regular file (a directory, a device such as /dev/full, a FIFO, a name
longer than the file system allows, a folder this user cannot write); the CLI calls it for every
output path before measuring, so a bad `--json` costs a second, not a whole profile. A symlink is
written through, to the regular file it points at, as editors do. `check_separate` refuses an
output that is one of the run's inputs (the pipeline file, a file of the user's, the study
storage) or the same file as another output of the run, so no flag can replace a user's file.

Example:
    >>> write_text(Path("/tmp/report.json"), "{}")  # doctest: +SKIP
    PosixPath('/tmp/report.json')
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tfperf.errors import OutputPathError

__all__ = [
    "check_output_path",
    "check_separate",
    "json_text",
    "rescue_path",
    "safe_stem",
    "same_file",
    "write_text",
]

#: Where a file may go when its own path fails at the end of a run (see `rescue_path`).
_FALLBACK_PREFIX = "tfperf-"


def json_text(data: Any, *, indent: int | None = 2) -> str:
    """`data` as strict JSON: a float that is not finite (NaN, infinity) becomes null.

    Python's `json` writes NaN by default, which JSON does not have: strict parsers (`jq`,
    JavaScript's `JSON.parse`, Go, Rust) reject the whole file. A figure that could not be
    measured is unknown, which JSON says with null.
    """
    return json.dumps(_finite(data), indent=indent, allow_nan=False)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def check_output_path(path: Path, option: str) -> Path:
    """The regular file `path` stands for (through symlinks); raises if it cannot be written.

    Args:
        path: where the user asked for the output.
        option: the option that named it (`--json`), or a description of the default path,
            for the message.

    Raises:
        OutputPathError: the path is a directory, a device or another non-regular file, its
            name is too long, a parent is a file, or its folder cannot be written by this user.
    """
    _check_name_length(path, path, option)  # first: asking the disk about such a name fails
    target = _through_symlinks(path, option)
    if target.exists():
        mode = os.stat(target).st_mode
        if stat.S_ISDIR(mode):
            raise OutputPathError(
                f"{option} {path} is a directory; give a file name, e.g. {path / 'out'}"
                f"{path.suffix or _suffix_hint(option)}."
            )
        if not stat.S_ISREG(mode):
            raise OutputPathError(
                f"{option} {path} is {_kind(mode)}, not a regular file; tfperf writes its output "
                "only to regular files, so it leaves it alone. Give a file path instead."
            )
        if not os.access(target, os.W_OK):
            raise OutputPathError(
                f"{option} {path} exists and this user may not write it; choose another path."
            )
    _check_name_length(target, path, option)
    _check_folder(target.parent, path, option)
    return target


def check_separate(
    outputs: Sequence[tuple[str, Path]], inputs: Sequence[tuple[str, Path]] = ()
) -> None:
    """Refuses an output that is an input of the run, or the same file as another output.

    Args:
        outputs: each output's option (`--json`, or words for a default path) and path.
        inputs: each input's description ("the pipeline file") and path.

    Raises:
        OutputPathError: naming both, the path and the fix. Files are compared as the disk sees
            them (through symlinks and hard links), and by absolute path when one is missing.
    """
    for index, (option, path) in enumerate(outputs):
        for what, source in inputs:
            if same_file(path, source):
                raise OutputPathError(
                    f"{option} {path} is {what}; tfperf never writes over its inputs. Give "
                    f"another path, e.g. {path.with_name(f'{path.stem}-tfperf{_hint(option)}')}."
                )
        for other_option, other in outputs[:index]:
            if same_file(path, other):
                raise OutputPathError(
                    f"{other_option} and {option} are the same file ({path}); one would replace "
                    "the other. Give each output its own path."
                )


def same_file(first: Path, second: Path) -> bool:
    """Whether two paths name one file: the same inode when both exist, else one absolute path."""
    try:
        if first.exists() and second.exists():
            return os.path.samefile(first, second)
    except OSError:
        pass
    return _absolute(first) == _absolute(second)


def safe_stem(name: str) -> str:
    """`name` made a plain file stem for a default output, kept inside its reports folder.

    A study name may hold `/` or `..` (`--study ../../escaped`); as a file name it would lead
    out of `reports/`. Anything but letters, digits, `.`, `_` and `-` becomes `_`, and leading
    dots go, so the stem is never a folder, a parent or a hidden file.

    Example:
        >>> safe_stem("../../escaped")
        '_.._escaped'
    """
    cleaned = _UNSAFE.sub("_", name).lstrip(".")
    return cleaned or "study"


def write_text(path: Path, text: str, option: str = "output") -> Path:
    """Writes `text` to `path` atomically (through a symlink to a regular file); returns `path`.

    The file gets the permissions of the file it replaces, or the usual ones for a new file
    (0666 less the umask), never mkstemp's private 0600.

    Raises:
        OutputPathError: as `check_output_path`, or the write failed (the disk is full, the
            folder became read-only); the message names the path and the cause.
    """
    target = check_output_path(path, option)
    target.parent.mkdir(parents=True, exist_ok=True)
    mode = _mode_for(target)
    try:
        handle, temporary = tempfile.mkstemp(
            dir=target.parent, prefix=f".{target.name[:200]}.", suffix=".tmp"
        )
    except OSError as error:
        raise OutputPathError(_write_failed(option, path, error)) from None
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except OSError as error:
        Path(temporary).unlink(missing_ok=True)
        raise OutputPathError(_write_failed(option, path, error)) from None
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def rescue_path(name: str) -> Path:
    """A fresh file in the temporary folder for an output whose own path failed at the end."""
    handle, path = tempfile.mkstemp(prefix=f"{_FALLBACK_PREFIX}{name}-", suffix=Path(name).suffix)
    os.close(handle)
    return Path(path)


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def _absolute(path: Path) -> Path:
    return Path(os.path.abspath(path.expanduser())).resolve(strict=False)


def _hint(option: str) -> str:
    return _suffix_hint(option) or ".out"


def _through_symlinks(path: Path, option: str) -> Path:
    if not path.is_symlink():
        return path
    try:
        return path.resolve(strict=False)
    except (OSError, RuntimeError) as error:  # a symlink loop
        raise OutputPathError(
            f"{option} {path} is a symlink that cannot be followed ({error}); "
            "remove it or give another path."
        ) from None


def _check_name_length(target: Path, path: Path, option: str) -> None:
    folder = _nearest_existing(target.parent)
    try:
        limit = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    longest = max((len(part.encode()) for part in target.parts), default=0)
    if longest > limit:
        raise OutputPathError(
            f"{option} {path}: a name in it is {longest} bytes long, over the {limit} bytes the "
            f"file system at {folder} allows; choose a shorter name."
        )


def _check_folder(folder: Path, path: Path, option: str) -> None:
    existing = _nearest_existing(folder)
    if not existing.is_dir():
        raise OutputPathError(
            f"{option} {path}: {existing} is a file, so no folder can be made there; "
            "choose another path."
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        made = "" if existing == folder else f" (to create {folder})"
        raise OutputPathError(
            f"{option} {path}: this user may not write in {existing}{made}; it is read-only or "
            "belongs to someone else. Choose a folder you can write, e.g. under your home."
        )


def _nearest_existing(folder: Path) -> Path:
    current = folder if folder != Path("") else Path(".")
    while not current.exists() and current != current.parent:
        current = current.parent
    return current


def _mode_for(target: Path) -> int:
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _write_failed(option: str, path: Path, error: OSError) -> str:
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        cause = "the disk holding it is full (or over quota); free space and run again"
    elif error.errno == errno.EROFS:
        cause = "its file system is read-only; choose a writable folder"
    elif error.errno in (errno.EACCES, errno.EPERM):
        cause = "this user may not write there; choose a folder you can write"
    else:
        cause = f"{error.strerror or error}"
    return f"cannot write {option} {path}: {cause}."


def _kind(mode: int) -> str:
    kinds = (
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((text for test, text in kinds if test(mode)), "not a regular file")


def _suffix_hint(option: str) -> str:
    return {"--json": ".json", "--html": ".html", "--write-patch": ".patch"}.get(option, "")
