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
ROOT = Path(__file__).resolve().parents[1]
#: The working tree's folders a run of tfperf writes by default; the tests never write there.
OUTPUT_FOLDERS = (ROOT / "reports", ROOT / "studies")


def _outputs_in_tree() -> dict[Path, int]:
    return {
        path: path.stat().st_mtime_ns
        for folder in OUTPUT_FOLDERS
        if folder.is_dir()
        for path in folder.rglob("*")
        if path.is_file()
    }


@pytest.fixture(scope="session", autouse=True)
def working_tree_untouched() -> Iterator[None]:
    """Fails the session if a test wrote into the working tree's reports/ or studies/.

    A user's `make demo` report must survive `make test`.
    """
    before = _outputs_in_tree()
    yield
    after = _outputs_in_tree()
    changed = sorted(str(p.relative_to(ROOT)) for p, t in after.items() if before.get(p) != t)
    assert not changed, f"tests wrote into the working tree: {changed}"


@pytest.fixture(autouse=True)
def run_outside_the_tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Each test starts in a fresh folder of its own, so default outputs land there.

    Not through `monkeypatch`: a test's own `monkeypatch.chdir` must restore *this* folder
    when the test ends, before fixtures that check the working directory tear down.
    """
    home = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("cwd"))
    yield
    os.chdir(home)


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
