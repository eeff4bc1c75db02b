"""The user's files, as they were: what their code changes while tfperf runs it is put back.

tfperf runs a user's training script or pipeline for a few hundred steps, many times over in a
tune, and what comes before its loop runs each time (a log opened with "w", the arguments
written out, an output folder cleared), as does the code after each epoch of a loop that
breaks its own epochs (`torch.save(model.state_dict(), "model.pt")`, a checkpoint rotated
with `os.replace`). Each would replace the user's own file with one from a run cut short.
While `kept_files` is in force, every file that existed before is copied aside the moment the
code first opens it for writing, truncates, removes or renames it, and is put back, contents
and times, when the run ends. Files the run creates are left where they are, and named.

What is seen: Python's own file calls (`open`, `os.open`, `os.replace`, `os.remove`,
`os.truncate`, `shutil.rmtree`) through an audit hook, so `pickle`, `json`, `numpy.save`,
`logging` and Keras's `.keras` archives too; and each function a framework declares as writing
a path in native code (`Framework.writers`, such as `torch.save`). What is not: writes a
library makes in native code it does not declare (TensorFlow's checkpoints, HDF5), and a
folder renamed.
Left alone: `__pycache__`, the interpreter's own prefix, and /dev, /proc, /sys; a file created
in the temporary folder is not named.

A run killed before it ends (tfperf stops a trial over its RAM budget with SIGKILL) leaves its
copies and their list in its folder: `put_back(folder)` restores them from the process that
started it, as the trial runner does once its child has gone.

Example:
    >>> with kept_files((Writer("torch.save", "f"),)) as kept:  # doctest: +SKIP
    ...     run_the_script()
    ...     kept.copied(), kept.created()  # doctest: +SKIP
    (['/home/me/run/model.pt'], ['/home/me/run/best.pt'])
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import inspect
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = ["Kept", "Writer", "kept_files", "put_back"]

logger = logging.getLogger(__name__)

#: The list of copies in a folder: one JSON line per file, the first for a path the one kept.
_LIST = "kept.jsonl"
#: A write through `open`/`os.open` with any of these flags changes the file.
_WRITES = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_TRUNC
_SYSTEM = ("/dev/", "/proc/", "/sys/")


@dataclasses.dataclass(frozen=True)
class Writer:
    """A function that writes a path in native code, unseen by Python's audit events: its
    dotted name (`torch.save`, `keras.Model.save_weights`) and the parameter holding the path."""

    function: str
    path_parameter: str


@dataclasses.dataclass
class Kept:
    """One run's copies, kept in `folder`, and the files it created."""

    folder: Path
    _seen: set[str] = dataclasses.field(default_factory=set)
    _new: list[str] = dataclasses.field(default_factory=list)
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def before_change(self, path: str) -> None:
        """Copies `path` aside, the first time this run is about to change it."""
        if path in self._seen or _left_alone(path, self.folder):
            return
        with self._lock:
            if path in self._seen:
                return
            self._seen.add(path)
            if not os.path.lexists(path):
                self._new.append(path)
            elif os.path.isfile(path):
                copy = self.folder / f"{len(self._seen)}-{os.path.basename(path)}"
                shutil.copy2(path, copy)  # contents and times
                _append(self.folder / _LIST, {"path": path, "copy": str(copy)})

    def copied(self) -> list[str]:
        """The files copied aside so far, by this process or a worker it forked: each is put
        back when the run ends."""
        return list(dict.fromkeys(entry["path"] for entry in _listed(self.folder)))

    def created(self) -> list[str]:
        """The files this process's run created that are there still, outside the temporary
        folder (where a library's own caches and scratch files go)."""
        temporary = os.path.realpath(tempfile.gettempdir()) + os.sep
        return [
            path for path in self._new if os.path.isfile(path) and not path.startswith(temporary)
        ]


_ACTIVE: Kept | None = None
_BUSY = threading.local()  # set while this module itself copies, so its own calls pass
_HOOKED = False


def _left_alone(path: str, folder: Path) -> bool:
    prefixes = (str(folder) + os.sep, sys.prefix + os.sep, sys.base_prefix + os.sep)
    return path.startswith((*_SYSTEM, *prefixes)) or f"{os.sep}__pycache__{os.sep}" in path


def _absolute(target: Any, dir_fd: Any = None) -> str | None:
    """The real path `target` names (relative to the folder open as `dir_fd`, where given);
    None for a file descriptor, a buffer, or a folder descriptor that cannot be read back."""
    if isinstance(target, int):
        return None  # a file descriptor: opened already
    try:
        name = os.fsdecode(os.fspath(target))
    except TypeError:
        return None  # a buffer, not a path
    if isinstance(dir_fd, int) and not os.path.isabs(name):
        try:
            name = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), name)
        except OSError:
            return None
    return os.path.realpath(name)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    kept = _ACTIVE
    if kept is None or getattr(_BUSY, "on", False):
        return
    if event == "open":
        mode, flags = args[1], args[2]
        if (isinstance(flags, int) and flags & _WRITES) or (
            isinstance(mode, str) and set(mode) & set("wax+")
        ):
            _change(kept, args[0])
    elif event == "os.remove":
        _change(kept, args[0], args[1])
    elif event == "os.truncate":
        _change(kept, args[0])
    elif event == "os.rename":  # os.rename and os.replace
        _change(kept, args[0], args[2])
        _change(kept, args[1], args[3])
    elif event == "shutil.rmtree":
        _change_tree(kept, args[0], args[1])


def _change(kept: Kept, target: Any, dir_fd: Any = None) -> None:
    path = _absolute(target, dir_fd)
    if path is None:
        return
    _BUSY.on = True
    try:
        kept.before_change(path)
    except OSError:
        pass  # a copy that cannot be made must not fail the user's own write
    finally:
        _BUSY.on = False


def _change_tree(kept: Kept, target: Any, dir_fd: Any) -> None:
    """Every file under a folder about to be removed whole (`shutil.rmtree`)."""
    top = _absolute(target, dir_fd)
    if top is None or not os.path.isdir(top):
        return
    for folder, _, names in os.walk(top):
        for name in names:
            _change(kept, os.path.join(folder, name))


@contextlib.contextmanager
def kept_files(writers: Sequence[Writer] = (), folder: Path | None = None) -> Iterator[Kept]:
    """Puts back, on exit, every file that existed before and that the code run inside
    changed (see the module's docstring). The copies go to `folder` (None: a temporary one,
    removed on exit). Nested, the outermost run keeps the files, and its writers stand."""
    global _ACTIVE, _HOOKED
    if _ACTIVE is not None:
        yield _ACTIVE
        return
    own = folder is None
    where = Path(tempfile.mkdtemp(prefix="tfperf-kept-")) if folder is None else folder
    where.mkdir(parents=True, exist_ok=True)
    kept = Kept(where.resolve())
    if not _HOOKED:
        sys.addaudithook(_audit)  # for the process's life: a hook cannot be removed
        _HOOKED = True
    undo = [_wrap(writer) for writer in writers]
    _ACTIVE = kept
    try:
        yield kept
    finally:
        _ACTIVE = None
        for each in reversed(undo):
            each()
        put_back(where)
        if own and not (where / _LIST).exists():  # else a copy that could not go back stays
            shutil.rmtree(where, ignore_errors=True)


def put_back(folder: Path) -> list[str]:
    """Restores every file listed in `folder` from its copy (the first copy of each path) and
    empties the list; the paths restored. Safe to call again, and from another process. A file
    that cannot be restored is logged with where its copy lies, and stays listed."""
    restored: list[str] = []
    failed: list[dict[str, str]] = []
    _BUSY.on = True
    try:
        for entry in _listed(folder):
            path, copy = entry["path"], Path(entry["copy"])
            if path in restored or entry in failed or not copy.is_file():
                continue
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)  # a folder removed whole
                shutil.copy2(copy, f"{path}.tfperf-kept")
                os.replace(f"{path}.tfperf-kept", path)
            except OSError as error:
                logger.warning("could not put back %s (%s); its copy is %s", path, error, copy)
                failed.append(entry)
            else:
                restored.append(path)
        (folder / _LIST).unlink(missing_ok=True)
        for entry in failed:
            _append(folder / _LIST, entry)
    finally:
        _BUSY.on = False
    return restored


def _listed(folder: Path) -> Iterator[dict[str, str]]:
    try:
        lines = (folder / _LIST).read_text().splitlines()
    except FileNotFoundError:
        return
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a line cut short by a kill: the change it guards had not begun
        if isinstance(entry, dict) and {"path", "copy"} <= entry.keys():
            yield entry


def _append(listed: Path, entry: dict[str, str]) -> None:
    """One line, written whole and on disk before the change it guards goes ahead."""
    descriptor = os.open(listed, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(descriptor, (json.dumps(entry) + "\n").encode())
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _wrap(writer: Writer) -> Callable[[], None]:
    """Puts a copy-first wrapper in place of `writer`'s function; returns what undoes it."""
    owner, name = _resolve(writer.function)
    if owner is None:
        return lambda: None
    original = getattr(owner, name)
    signature = inspect.signature(original)

    @functools.wraps(original)
    def copying_first(*args: Any, **kwargs: Any) -> Any:
        kept = _ACTIVE
        if kept is not None:
            try:
                target = signature.bind_partial(*args, **kwargs).arguments.get(
                    writer.path_parameter
                )
            except TypeError:
                target = None  # the call itself is wrong: let the original say so
            if target is not None:
                _change(kept, target)
        return original(*args, **kwargs)

    setattr(owner, name, copying_first)
    return lambda: setattr(owner, name, original)


def _resolve(dotted: str) -> tuple[Any, str]:
    """The object holding the last name of `dotted` (its package imported: the framework's
    own, which its run imports anyway) and that name; (None, name) where there is none."""
    package, *attributes, name = dotted.split(".")
    try:
        owner: Any = importlib.import_module(package)
    except ImportError:
        return None, name
    for attribute in attributes:
        owner = getattr(owner, attribute, None)
    return (owner, name) if owner is not None and hasattr(owner, name) else (None, name)
