"""Fixtures for file systems that fail: a tiny tmpfs that fills up, a read-only folder.

tests/conftest.py imports the fixtures, so every test can use them. The tmpfs needs root and
`mount`; where they are missing the test is skipped with that reason, and fails under CI=true
(CI runs as root, where a tmpfs can always be mounted).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.postgres_server import in_ci

#: Big enough for an SQLite study and a report's temporary file, small enough to fill at once.
TMPFS_SIZE = "320k"


def _mount(folder: Path, *options: str) -> None:
    if os.geteuid() != 0:
        _unavailable("mounting a tmpfs needs root (run the suite as root, as CI does)")
    folder.mkdir()
    completed = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", ",".join((f"size={TMPFS_SIZE}", *options)), "tmpfs", folder],
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        _unavailable(f"cannot mount a tmpfs here: {completed.stderr.strip()}")


def _unavailable(reason: str) -> None:
    if in_ci():
        pytest.fail(f"{reason}; CI must run the full-disk tests")
    pytest.skip(reason)


def _unmount(folder: Path) -> None:
    subprocess.run(["umount", "-l", folder], capture_output=True, check=False)


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A fresh, empty tmpfs of `TMPFS_SIZE`, unmounted afterwards."""
    folder = tmp_path / "small"
    _mount(folder)
    try:
        yield folder
    finally:
        _unmount(folder)


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A folder this user cannot write: a read-only tmpfs as root, else mode 0555."""
    folder = tmp_path / "read-only"
    if os.geteuid() != 0:
        folder.mkdir()
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    _mount(folder, "ro")
    try:
        yield folder
    finally:
        _unmount(folder)


def fill(folder: Path) -> None:
    """Fills the file system holding `folder` until no byte is left."""
    with (folder / "filler").open("wb", buffering=0) as stream:
        try:
            while True:
                stream.write(b"\0" * 4096)
        except OSError:
            pass
