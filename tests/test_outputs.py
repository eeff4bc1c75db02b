"""`tfperf.outputs`: atomic writes that never replace what is not a regular file of ours."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.mounts import fill
from tfperf.errors import OutputPathError
from tfperf.outputs import check_output_path, check_separate, rescue_path, safe_stem, write_text


def test_writes_atomically_with_the_usual_permissions(tmp_path):
    target = tmp_path / "sub" / "report.json"
    assert write_text(target, "{}", "--json") == target
    assert target.read_text() == "{}"
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask
    assert [p.name for p in target.parent.iterdir()] == ["report.json"]  # no temporary left


def test_keeps_the_permissions_of_the_file_it_replaces(tmp_path):
    target = tmp_path / "r.json"
    target.write_text("old")
    target.chmod(0o640)
    write_text(target, "new")
    assert (target.read_text(), stat.S_IMODE(target.stat().st_mode)) == ("new", 0o640)


def test_writes_through_a_symlink_to_a_regular_file(tmp_path):
    real = tmp_path / "real.html"
    real.write_text("old")
    link = tmp_path / "link.html"
    link.symlink_to(real)
    write_text(link, "new", "--html")
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == "new"


def test_a_fifo_is_refused_and_left_alone(tmp_path):
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    with pytest.raises(OutputPathError, match=r"--json .*out\.json is a named pipe \(FIFO\)"):
        write_text(fifo, "{}", "--json")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_device_is_refused_and_left_alone():
    with pytest.raises(OutputPathError, match="/dev/full is a character device"):
        check_output_path(Path("/dev/full"), "--html")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_a_symlink_to_a_device_is_refused(tmp_path):
    link = tmp_path / "report.html"
    link.symlink_to("/dev/null")
    with pytest.raises(OutputPathError, match="is a character device"):
        write_text(link, "x", "--html")
    assert link.is_symlink()


def test_a_directory_is_refused_with_a_file_name_to_use(tmp_path):
    with pytest.raises(
        OutputPathError, match=r"is a directory; give a file name, e\.g\. .*out\.json"
    ):
        check_output_path(tmp_path, "--json")


def test_a_name_too_long_is_refused_before_the_disk_is_asked(tmp_path):
    with pytest.raises(OutputPathError, match=r"is 305 bytes long, over the 255 bytes"):
        check_output_path(tmp_path / ("x" * 300 + ".json"), "--json")


def test_a_file_where_a_folder_must_be_is_refused(tmp_path):
    blocker = tmp_path / "reports"
    blocker.write_text("")
    with pytest.raises(OutputPathError, match=r"reports is a file, so no folder can be made"):
        check_output_path(blocker / "a" / "r.html", "--html")


def test_a_read_only_file_system_is_named(read_only_dir):
    with pytest.raises(OutputPathError, match=r"may not write in .*read-only"):
        check_output_path(read_only_dir / "r.json", "--json")


def test_a_full_disk_is_named(small_tmpfs):
    fill(small_tmpfs)
    with pytest.raises(OutputPathError, match="the disk holding it is full"):
        write_text(small_tmpfs / "r.json", "x" * 100_000, "--json")
    assert sorted(p.name for p in small_tmpfs.iterdir()) == ["filler"]  # no temporary left


def test_rescue_path_is_a_fresh_file_in_the_temporary_folder():
    first, second = rescue_path("r.json"), rescue_path("r.json")
    try:
        assert first != second and first.name.startswith("tfperf-r.json-")
        assert first.suffix == ".json" and first.exists()
    finally:
        first.unlink()
        second.unlink()


def test_an_output_that_is_an_input_is_refused_naming_both(tmp_path):
    source = tmp_path / "pipeline.py"
    source.write_text("x = 1\n")
    with pytest.raises(OutputPathError, match=r"--json .*pipeline\.py is the pipeline file"):
        check_separate([("--json", source)], [("the pipeline file", source)])


def test_the_same_file_by_another_name_is_caught(tmp_path):
    source = tmp_path / "pipeline.py"
    source.write_text("x = 1\n")
    (tmp_path / "link.py").symlink_to(source)
    os.link(source, tmp_path / "hard.py")
    for alias in (
        tmp_path / "link.py",
        tmp_path / "hard.py",
        tmp_path / "sub" / ".." / "pipeline.py",
    ):
        with pytest.raises(OutputPathError, match="never writes over its inputs"):
            check_separate([("--html", alias)], [("the pipeline file", source)])


def test_two_outputs_on_one_path_are_refused(tmp_path):
    with pytest.raises(OutputPathError, match="--json and --html are the same file"):
        check_separate([("--json", tmp_path / "same.out"), ("--html", tmp_path / "same.out")])
    check_separate([("--json", tmp_path / "a.json"), ("--html", tmp_path / "a.html")])


def test_safe_stem_keeps_a_derived_name_inside_its_folder():
    for name in ("../../../escaped", "/etc/passwd", "a/b", ".hidden", "..", "sp ace"):
        stem = safe_stem(name)
        assert "/" not in stem and not stem.startswith(".") and stem
        assert (Path("reports") / f"{stem}.html").resolve().parent == Path("reports").resolve()
    assert safe_stem("pipeline") == "pipeline"
