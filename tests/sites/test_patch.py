"""Patches of call-site values: exact rewrites, refusals with the fix, and real application."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.fakes.trials import FakeRunner
from tfperf.cli.sites import patch_section
from tfperf.frameworks.tensorflow import discover_sites
from tfperf.hardware import Machine
from tfperf.knobs import AUTOTUNE, Knobs, SiteName
from tfperf.pipeline import load_pipeline
from tfperf.results.discovery import ArgumentForm, CallSite
from tfperf.sites import changes_between, make_patch
from tfperf.sites._patch import Change
from tfperf.trials import with_sites
from tfperf.tuner import TuneOptions, Tuner


def write(folder: Path, source: str, name: str = "pipeline.py") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    return path


def site(name: str, form: ArgumentForm, value: int | None, index: int | None = None) -> CallSite:
    """A site known by its line only, as AutoGraph reports one."""
    parsed = SiteName.parse(name)
    return CallSite(
        name=name,
        file=parsed.file,
        line=parsed.line,
        col=None,
        end_line=None,
        end_col=None,
        method=parsed.method,
        argument=parsed.argument,
        form=form,
        index=index,
        value=value,
    )


SOURCE = """
import tensorflow as tf

BATCH = 32

def make_dataset():
    ds = tf.data.Dataset.range(64).map(abs, num_parallel_calls=4)
    ds = ds.map(abs)
    ds = ds.batch(32)
    return ds.shuffle(BATCH).prefetch(1)
"""


def test_keyword_positional_and_absent_arguments_are_rewritten(tmp_path):
    write(tmp_path, SOURCE)
    patch = make_patch(
        tmp_path,
        [
            Change(site("map@pipeline.py:6.num_parallel_calls", ArgumentForm.KEYWORD, 4), 8),
            Change(site("map@pipeline.py:7.num_parallel_calls", ArgumentForm.ABSENT, None), -1),
            Change(site("batch@pipeline.py:8.batch_size", ArgumentForm.POSITIONAL, 32, 0), 64),
            Change(site("prefetch@pipeline.py:9.buffer_size", ArgumentForm.POSITIONAL, 1, 0), -1),
        ],
    )
    assert patch.diff == (
        "--- ./pipeline.py\n"
        "+++ ./pipeline.py\n"
        "@@ -3,7 +3,7 @@\n"
        " BATCH = 32\n"
        " \n"
        " def make_dataset():\n"
        "-    ds = tf.data.Dataset.range(64).map(abs, num_parallel_calls=4)\n"
        "-    ds = ds.map(abs)\n"
        "-    ds = ds.batch(32)\n"
        "-    return ds.shuffle(BATCH).prefetch(1)\n"
        "+    ds = tf.data.Dataset.range(64).map(abs, num_parallel_calls=8)\n"
        "+    ds = ds.map(abs, num_parallel_calls=tf.data.AUTOTUNE)\n"
        "+    ds = ds.batch(64)\n"
        "+    return ds.shuffle(BATCH).prefetch(tf.data.AUTOTUNE)\n"
    )
    assert patch.manual == ()
    assert (tmp_path / "pipeline.py").read_text() == textwrap.dedent(SOURCE).lstrip()


def test_a_variable_is_refused_with_the_line_and_the_value_to_set(tmp_path):
    write(tmp_path, SOURCE)
    change = Change(site("shuffle@pipeline.py:9.buffer_size", ArgumentForm.POSITIONAL, 32, 0), 64)
    patch = make_patch(tmp_path, [change])
    assert patch.diff == ""
    assert [edit.describe() for edit in patch.manual] == [
        "pipeline.py:9: set buffer_size of `shuffle(...)` to 64 (buffer_size is `BATCH` there, "
        "not a literal tfperf can rewrite)"
    ]


def test_a_file_changed_since_discovery_is_refused(tmp_path):
    write(tmp_path, SOURCE)
    stale = site("batch@pipeline.py:8.batch_size", ArgumentForm.POSITIONAL, 16, 0)
    moved = site("batch@pipeline.py:12.batch_size", ArgumentForm.POSITIONAL, 32, 0)
    patch = make_patch(tmp_path, [Change(stale, 64), Change(moved, 64)])
    assert patch.diff == ""
    assert [edit.instruction for edit in patch.manual] == [
        "set batch_size of `batch(...)` to 64 (batch_size is now 32, not 16 as measured (the "
        "file changed since): run tfperf again)",
        "set batch_size of `batch(...)` to 64 (no `batch(...)` call is where tfperf found it "
        "(the file changed since): run tfperf again)",
    ]


@pytest.mark.parametrize(
    ("imports", "spelled"),
    [
        ("import tensorflow as tf", "tf.data.AUTOTUNE"),
        ("import tensorflow", "tensorflow.data.AUTOTUNE"),
        ("from tensorflow.data import AUTOTUNE as AT", "AT"),
        (
            "import tensorflow as tf\nX = tf.data.experimental.AUTOTUNE",
            "tf.data.experimental.AUTOTUNE",
        ),
    ],
)
def test_autotune_is_spelled_as_the_file_imports_tensorflow(tmp_path, imports, spelled):
    line = len(imports.splitlines()) + 1
    write(tmp_path, f"{imports}\nds = ds.prefetch(2)\n")
    name = f"prefetch@pipeline.py:{line}.buffer_size"
    patch = make_patch(tmp_path, [Change(site(name, ArgumentForm.POSITIONAL, 2, 0), AUTOTUNE)])
    assert f"+ds = ds.prefetch({spelled})\n" in patch.diff


def test_autotune_without_a_tensorflow_import_is_left_to_do_by_hand(tmp_path):
    write(tmp_path, "ds = ds.prefetch(2)\n")
    change = Change(site("prefetch@pipeline.py:1.buffer_size", ArgumentForm.POSITIONAL, 2, 0), -1)
    (edit,) = make_patch(tmp_path, [change]).manual
    assert "the file imports no tensorflow to spell AUTOTUNE with" in edit.instruction


def test_two_calls_on_a_line_are_told_apart_by_where_they_end(tmp_path):
    path = write(tmp_path, "ds = ds.map(f, num_parallel_calls=2).map(g, num_parallel_calls=2)\n")
    second = CallSite(
        name="map@pipeline.py:1#2.num_parallel_calls",
        file="pipeline.py",
        line=1,
        col=5,
        end_line=1,
        end_col=len(path.read_text().rstrip("\n")),
        method="map",
        argument="num_parallel_calls",
        form=ArgumentForm.KEYWORD,
        index=None,
        value=2,
    )
    patch = make_patch(tmp_path, [Change(second, 8)])
    assert "+ds = ds.map(f, num_parallel_calls=2).map(g, num_parallel_calls=8)\n" in patch.diff
    ambiguous = site("map@pipeline.py:1.num_parallel_calls", ArgumentForm.KEYWORD, 2)
    (edit,) = make_patch(tmp_path, [Change(ambiguous, 8)]).manual
    assert "line 1 holds 2 `map(...)` calls and tfperf cannot tell them apart" in edit.instruction


def test_changes_between_keeps_only_real_changes():
    given = site("batch@p.py:3.batch_size", ArgumentForm.POSITIONAL, 32, 0)
    absent = site("map@p.py:4.num_parallel_calls", ArgumentForm.ABSENT, None)
    chosen = {given.name: 32, absent.name: None}
    assert changes_between([given, absent], chosen) == []
    chosen = {given.name: 64, absent.name: 2}
    assert changes_between([given, absent], chosen) == [Change(given, 64), Change(absent, 2)]
    # An argument left out runs with its default: choosing that default writes nothing.
    kept = site("DataLoader@p.py:5.persistent_workers", ArgumentForm.ABSENT, 0)
    assert changes_between([kept], {kept.name: 0}) == []
    assert changes_between([kept], {kept.name: 1}) == [Change(kept, 1)]


# --- real files: discovered, patched, applied, run ------------------------------------------

PLAIN = (
    "import tensorflow as tf\r\n"
    "import stages\r\n"
    "\r\n"
    "def make_dataset():\r\n"
    "    ds = stages.source().map(lambda x: x * 2,\r\n"
    "                             num_parallel_calls=2)\r\n"
    "    return ds.batch(8).prefetch(1)\r\n"
    "\r\n"
    "def make_train_step():\r\n"
    "    return lambda batch: batch"  # no newline at the end, CRLF line ends
)
STAGES = (
    "import tensorflow as tf\n\ndef source():\n    return tf.data.Dataset.range(64).shuffle(16)\n"
)


def discovered_patch(folder: Path) -> str:
    write(folder, STAGES, "stages.py")
    (folder / "pipeline.py").write_bytes(PLAIN.encode())
    found = discover_sites(load_pipeline(folder / "pipeline.py"))
    chosen = {
        "map@pipeline.py:5.num_parallel_calls": AUTOTUNE,
        "batch@pipeline.py:7.batch_size": 16,
        "prefetch@pipeline.py:7.buffer_size": 2,
        "shuffle@stages.py:4.buffer_size": 32,
    }
    patch = make_patch(folder, changes_between(found.sites, chosen))
    assert patch.manual == () and len(patch.written) == 4
    return patch.diff


def rediscovered(folder: Path) -> dict[str, int | None]:
    sys.modules.pop("stages", None)  # imported before the patch: read the patched one
    return discover_sites(load_pipeline(folder / "pipeline.py")).values()


@pytest.mark.tf
@pytest.mark.skipif(shutil.which("patch") is None, reason="needs GNU patch")
def test_the_patch_applies_with_patch_p0_and_the_file_runs_with_the_new_values(tmp_path):
    diff = discovered_patch(tmp_path)
    subprocess.run(["patch", "-p0", "--quiet"], input=diff.encode(), cwd=tmp_path, check=True)
    assert (tmp_path / "pipeline.py").read_bytes().endswith(b"\r\n    return lambda batch: batch")
    assert rediscovered(tmp_path) == {
        "shuffle@stages.py:4.buffer_size": 32,
        "map@pipeline.py:5.num_parallel_calls": AUTOTUNE,
        "batch@pipeline.py:7.batch_size": 16,
        "prefetch@pipeline.py:7.buffer_size": 2,
        "map@pipeline.py:5.after_batch": 0,  # a structure edit tfperf may make (--reorder)
    }


@pytest.mark.tf
@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_patch_applies_with_git_apply_in_a_repository(tmp_path):
    folder = tmp_path / "project" / "input"
    folder.mkdir(parents=True)
    diff = discovered_patch(folder)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path / "project", check=True)
    (tmp_path / "fix.patch").write_text(diff)
    subprocess.run(["git", "apply", str(tmp_path / "fix.patch")], cwd=folder, check=True)
    assert rediscovered(folder)["batch@pipeline.py:7.batch_size"] == 16


# --- the search over sites, on a fake trial runner -------------------------------------------

MACHINE = Machine(
    cpu_count=2, total_ram_bytes=8 << 30, available_ram_bytes=6 << 30, gpu_names=(), cpu_bf16=False
)
TUNED = """
import tensorflow as tf

def make_dataset():
    ds = tf.data.Dataset.range(64).map(abs, num_parallel_calls=1)
    return ds.batch(8)

def make_train_step():
    return lambda batch: batch
"""
MAP = "map@pipeline.py:4.num_parallel_calls"


def map_speed(knobs: Knobs) -> float:
    """Input wait shrinks with the map site's parallelism (AUTOTUNE counts as 4)."""
    workers = knobs.sites.get(MAP, 1)  # the verified patched files run as written: no sites
    return 0.08 / (4 if workers == AUTOTUNE else workers)


@pytest.mark.tf
def test_a_search_over_sites_ends_in_a_patch_of_the_winner(tmp_path, capsys):
    write(tmp_path, TUNED)
    pipeline = with_sites(load_pipeline(tmp_path / "pipeline.py"))
    added = "prefetch@pipeline.py:3.buffer_size"  # no prefetch in the file: tfperf may add one
    edits = {"cache@pipeline.py:4.added": 0, "map@pipeline.py:4.after_batch": 0}  # may be made
    assert pipeline.baseline.sites == {
        MAP: 1,
        "batch@pipeline.py:5.batch_size": 8,
        added: 0,
        **edits,
    }
    options = TuneOptions(
        trials=6,
        storage=f"sqlite:///{tmp_path / 'study.db'}",
        seed=3,
        rounds=2,
        finalists=1,
        fixes={
            "batch@pipeline.py:5.batch_size": 8,
            "cache@pipeline.py:4.added": 0,  # the fake trials time the map alone
            "deterministic": None,
            "private_threadpool_size": None,
        },
    )
    runner = FakeRunner(wait_for=map_speed)
    result = Tuner(pipeline, options, runner=runner, machine=MACHINE).run()
    assert runner.requests[0].knobs.sites[MAP] == 1  # the baseline as written
    assert runner.requests[1].knobs.sites[MAP] == AUTOTUNE  # everything AUTOTUNE
    assert {request.knobs.sites[MAP] for request in runner.requests} > {1, AUTOTUNE}
    best = result.best.knobs.sites[MAP]
    assert best != 1 and result.speedup_vs_baseline.significant
    text = patch_section(pipeline, result, tmp_path / "reports" / "tuned.patch")
    shown = "tf.data.AUTOTUNE" if best == AUTOTUNE else str(best)
    assert f"+    ds = tf.data.Dataset.range(64).map(abs, num_parallel_calls={shown})\n" in text
    assert (tmp_path / "reports" / "tuned.patch").read_text().startswith("--- ./pipeline.py\n")
    assert f"Apply it from {tmp_path}: `patch -p0 <" in text


@pytest.mark.tf
def test_tune_a_plain_file_prints_and_writes_the_patch(tmp_path, monkeypatch, capsys):
    from tfperf.cli.main import main

    write(tmp_path, TUNED)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("tfperf.tuner._tuner.run_trial", FakeRunner(wait_for=map_speed))
    fixes = ["--fix", "batch@pipeline.py:5.batch_size=8", "--fix", "mixed_precision=float32"]
    options = ["--trials", "5", "--finalists", "1", "--rounds", "2", "--seed", "3", *fixes]
    status = main(["tune", "pipeline.py", *options, "--quiet", "--write-patch", "--", "--x"])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "Tunable call sites (5), as written:\n  map@pipeline.py:4.num_parallel_calls  1\n" in err
    assert "The costliest stage of your input pipeline as written, run alone: " in err
    assert "Patch for your code (" in out and "--- ./pipeline.py\n+++ ./pipeline.py\n" in out
    written = (tmp_path / "reports" / "pipeline.patch").read_text()
    assert written.startswith("--- ./pipeline.py\n") and written in out
    assert f"Patch written to reports/pipeline.patch. Apply it from {tmp_path}" in out


BATCH = "batch@pipeline.py:5.batch_size"


def batch_speed(knobs: Knobs) -> float:
    """Input wait shrinks as the written batch size grows: the winner changes training."""
    return 0.64 / (knobs.sites[BATCH] or 1)


@pytest.mark.tf
def test_a_winner_that_changes_a_written_batch_changes_training_everywhere(
    tmp_path, monkeypatch, capsys
):
    """One rule: the tune JSON, the terminal summary and the HTML report agree on the batch."""
    import html
    import json

    from tfperf.cli.main import main

    write(tmp_path, TUNED)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("tfperf.tuner._tuner.run_trial", FakeRunner(wait_for=batch_speed))
    fixes = ["--fix", f"{MAP}=1", "--fix", "mixed_precision=float32"]
    options = ["--trials", "6", "--finalists", "1", "--rounds", "2", "--seed", "3", *fixes]
    status = main(["tune", "pipeline.py", *options, "--quiet"])
    out, err = capsys.readouterr()
    assert status == 0, err
    saved = json.loads((tmp_path / "reports" / "pipeline-tune.json").read_text())
    size = saved["best"]["knobs"]["sites"][BATCH]
    assert size > 8 and saved["changes_training"] == [BATCH]
    warning = (
        f"The winner changes {BATCH} (8 → {size}), a batch size or shuffle buffer in your code: "
        "this alters training, not only speed. Check accuracy before adopting it."
    )
    assert f"Warning: {warning}" in out
    assert f"It changes {BATCH}, which alters training" in saved["recommendation"]
    page = (tmp_path / "reports" / "pipeline.html").read_text(encoding="utf-8")
    assert html.escape(warning) in page or warning in page
