"""Shared fixtures: writing small pipeline files into a temporary folder, a PostgreSQL server."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.mounts import read_only_dir, small_tmpfs  # noqa: F401 (fixtures for every test)
from tests.postgres_server import PostgresServer, start_for_tests

# Keep TensorFlow's C++ logging out of test output; set before any test imports it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

WritePipeline = Callable[..., Path]


@pytest.fixture(autouse=True)
def quiet_optuna() -> Iterator[None]:
    """Optuna logs every trial at INFO; tests keep its output to warnings."""
    import optuna

    level = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    yield
    optuna.logging.set_verbosity(level)


@pytest.fixture
def write_pipeline(tmp_path: Path) -> WritePipeline:
    """Writes `source` (dedented) as `name` in a fresh folder and returns its path."""

    def write(source: str, name: str = "pipeline.py") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
        return path

    return write


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A private PostgreSQL server for the session (tests/postgres_server.py).

    Skips the tests that use it where PostgreSQL is not installed; under `CI=true` fails them.
    """
    server = start_for_tests()
    yield server
    server.stop()
