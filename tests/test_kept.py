"""`tfperf.kept`: a file of the user's that code run under tfperf changes is put back after."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from tfperf.kept import Writer, kept_files, put_back


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary folder other than the test's, so files the test creates in its own folder
    count as the user's (a file created in the temporary folder is not named)."""
    other = tmp_path / "system-temporary"
    other.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(other))
    return other


def _user_files(folder: Path) -> dict[str, Path]:
    files = {name: folder / name for name in ("model.pt", "log.txt", "old.pt", "gone.txt")}
    for name, path in files.items():
        path.write_text(f"trained {name}\n")
        os.utime(path, (1_000_000_000, 1_000_000_000))
    return files


def test_every_file_the_code_changes_through_python_is_put_back_as_it_was(tmp_path, elsewhere):
    files = _user_files(tmp_path)
    with kept_files() as kept:
        files["model.pt"].write_text("a run cut short")  # open(..., "w")
        with open(files["log.txt"], "a") as log:
            log.write("epoch 0\n")
        (tmp_path / "new.pt").write_text("rotated in")
        os.replace(tmp_path / "new.pt", files["old.pt"])
        os.remove(files["gone.txt"])
        (tmp_path / "best.pt").write_text("a run cut short")
        assert sorted(Path(p).name for p in kept.copied()) == [
            "gone.txt",
            "log.txt",
            "model.pt",
            "old.pt",
        ]
        assert [Path(p).name for p in kept.created()] == ["best.pt"]
    for name, path in files.items():
        assert path.read_text() == f"trained {name}\n", name
        assert path.stat().st_mtime == 1_000_000_000, name
    assert (tmp_path / "best.pt").read_text() == "a run cut short"  # created: left, named
    assert not list(tmp_path.glob("*.tfperf-kept"))
    assert not list(elsewhere.iterdir())  # its own folder of copies is gone


def test_a_file_only_read_is_not_copied(tmp_path, elsewhere):
    files = _user_files(tmp_path)
    with kept_files() as kept:
        assert files["model.pt"].read_text() == "trained model.pt\n"
        assert kept.copied() == [] and kept.created() == []


def test_a_native_writer_is_seen_only_where_the_framework_declares_it(tmp_path, elsewhere):
    torch = pytest.importorskip("torch")
    model = tmp_path / "model.pt"
    torch.save({"weights": torch.ones(2)}, model)
    trained = model.read_bytes()
    with kept_files() as kept:
        torch.save({"weights": torch.zeros(2)}, model)  # C++ opens the file: no audit event
        assert kept.copied() == []
    assert model.read_bytes() != trained
    torch.save({"weights": torch.ones(2)}, model)
    trained, save = model.read_bytes(), torch.save
    with kept_files((Writer("torch.save", "f"),)) as kept:
        torch.save({"weights": torch.zeros(2)}, f=str(model))
        assert kept.copied() == [str(model.resolve())]
    assert model.read_bytes() == trained
    assert torch.save is save  # the original is back in place


def test_a_worker_the_run_forked_has_its_changes_put_back_too(tmp_path, elsewhere):
    files = _user_files(tmp_path)
    with kept_files() as kept:
        pid = os.fork()
        if pid == 0:  # a DataLoader worker, say
            files["log.txt"].write_text("written by a worker")
            os._exit(0)
        os.waitpid(pid, 0)
        assert [Path(p).name for p in kept.copied()] == ["log.txt"]
    assert files["log.txt"].read_text() == "trained log.txt\n"


def test_a_run_killed_mid_way_is_put_back_by_the_process_that_started_it(tmp_path, elsewhere):
    files = _user_files(tmp_path)
    folder = tmp_path / "trial" / "kept"
    child = textwrap.dedent(
        f"""
        import os, signal
        from pathlib import Path
        from tfperf.kept import kept_files

        with kept_files(folder=Path({str(folder)!r})):
            Path({str(files["model.pt"])!r}).write_text("a run cut short")
            os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    done = subprocess.run([sys.executable, "-c", child], check=False, timeout=120)
    assert done.returncode == -signal.SIGKILL
    assert files["model.pt"].read_text() == "a run cut short"
    assert put_back(folder) == [str(files["model.pt"].resolve())]
    assert files["model.pt"].read_text() == "trained model.pt\n"
    assert put_back(folder) == []  # again: nothing left to do


def test_nested_the_outer_run_keeps_the_files(tmp_path, elsewhere):
    files = _user_files(tmp_path)
    with kept_files() as outer:
        with kept_files() as inner:
            assert inner is outer
            files["model.pt"].write_text("a run cut short")
        assert files["model.pt"].read_text() == "a run cut short"  # the outer is still running
    assert files["model.pt"].read_text() == "trained model.pt\n"


def test_bytecode_caches_are_left_alone(tmp_path, elsewhere):
    cache = tmp_path / "__pycache__" / "data.cpython-311.pyc"
    cache.parent.mkdir()
    cache.write_bytes(b"old")
    with kept_files() as kept:
        cache.write_bytes(b"new")
        assert kept.copied() == []
    assert cache.read_bytes() == b"new"


def test_a_folder_removed_whole_comes_back_with_its_files(tmp_path, elsewhere):
    runs = tmp_path / "checkpoints" / "epoch-9"
    runs.mkdir(parents=True)
    (runs / "model.pt").write_text("trained")
    (runs / "optimizer.pt").write_text("trained")
    with kept_files() as kept:
        shutil.rmtree(tmp_path / "checkpoints")  # rotating old checkpoints away
        assert len(kept.copied()) == 2
    assert sorted(p.name for p in runs.iterdir()) == ["model.pt", "optimizer.pt"]
    assert (runs / "model.pt").read_text() == "trained"
