"""Issue 17: every failure says what happened, every interrupt stops, no output clobbers.

Real processes on real files: each test here failed on the commit before the fix (196bd57).
"""

from __future__ import annotations

import ast
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import optuna
import psutil
import pytest

from tests import pipelines
from tests.cli.console import TFPERF, start_tfperf, wait_for_file
from tests.deadlines import HANG_S
from tfperf.cli.main import EXIT_FAILED, EXIT_USAGE, main

# The first element never arrives: a numpy_function that sleeps for an hour.
HANGS = """
import pathlib, time
import keras
import numpy as np
import tensorflow as tf

BASELINE = {"batch_size": 4}

def _never(x):
    pathlib.Path(__file__).with_name("blocking").touch()  # the tests wait for it
    time.sleep(3600)
    return x

def make_dataset(knobs):
    ds = tf.data.Dataset.from_tensor_slices(np.ones((16, 4), "float32")).batch(knobs.batch_size)
    return ds.map(lambda x: (tf.numpy_function(_never, [x], tf.float32), tf.zeros((4, 1))))

def make_model(knobs):
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    return model
"""

# Leaves a non-daemon thread and a process in its own session running when imported.
# `MARKER` names the helper process, so a suite running beside this one (its own helper
# alive at that moment) is never mistaken for this test's leftover.
LEAVES_THINGS_RUNNING = (
    """
import subprocess, sys, threading, time
threading.Thread(target=time.sleep, args=(3600,)).start()
HELPER = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)  # MARKER"],
                          start_new_session=True)
"""
    + pipelines.TRAIN_STEP
)


def _wait_for_worker(process: subprocess.Popen[str], timeout_s: float = HANG_S) -> None:
    """Waits until `process` runs a measuring child (not the call-site discovery)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        for child in psutil.Process(process.pid).children(recursive=True):
            try:
                command = " ".join(child.cmdline())
            except psutil.Error:
                continue
            # A trial is a fresh `_worker`, or a fork of the tuner's zygote (its own children).
            forked = "tfperf.trials._zygote" in command and child.ppid() != process.pid
            if forked or ("tfperf.trials._worker" in command and "discover" not in command):
                time.sleep(2)  # let it reach the user's code
                return
        time.sleep(0.2)
    raise AssertionError("no trial child started")


def _kill(process: subprocess.Popen[str]) -> None:
    for child in psutil.Process(process.pid).children(recursive=True):
        child.kill()
    process.kill()
    process.communicate()


# Item 1 and 3: output paths.


def test_profile_refuses_a_fifo_output_before_measuring(capsys, write_pipeline, tmp_path):
    path = write_pipeline(pipelines.TRAIN_STEP)
    fifo = tmp_path / "report.html"
    os.mkfifo(fifo)
    status = main(["profile", str(path), "--steps", "1", "--html", str(fifo), "--quiet"])
    err = capsys.readouterr().err
    assert status == EXIT_USAGE, err
    assert f"--html {fifo} is a named pipe (FIFO), not a regular file" in err
    assert "Profiling" not in err  # refused before the measurement
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_profile_refuses_a_directory_as_json_before_measuring(capsys, write_pipeline, tmp_path):
    path = write_pipeline(pipelines.TRAIN_STEP)
    status = main(["profile", str(path), "--json", str(tmp_path), "--quiet"])
    err = capsys.readouterr().err
    assert status == EXIT_USAGE, err
    assert f"--json {tmp_path} is a directory; give a file name" in err
    assert "internal error" not in err and "Profiling" not in err


def test_tune_checks_every_output_before_the_search(capsys, write_pipeline, tmp_path):
    path = write_pipeline(pipelines.TRAIN_STEP)
    (tmp_path / "blocker").write_text("")
    status = main(["tune", str(path), "--write-patch", str(tmp_path / "blocker" / "x.patch")])
    err = capsys.readouterr().err
    assert status == EXIT_USAGE, err
    assert "--write-patch" in err and "blocker is a file, so no folder can be made there" in err
    assert not (tmp_path / "studies").exists()  # no study was opened


def test_a_result_whose_path_fails_at_the_end_is_kept_and_said_where(capsys, small_tmpfs, tmp_path):
    from tests.mounts import fill
    from tests.reports import fake_profile
    from tfperf.cli.profile import _save

    fill(small_tmpfs)  # the folder passed the check; the write fails at the end
    saved_json, saved_html, failed = _save(
        fake_profile(), small_tmpfs / "r.json", tmp_path / "r.html"
    )
    err = capsys.readouterr().err
    assert failed and saved_html == tmp_path / "r.html"
    assert (
        saved_json.parent != small_tmpfs
        and json.loads(saved_json.read_text())["end_to_end"]["steps"] == 5
    )
    assert f"cannot write --json {small_tmpfs}/r.json: the disk holding it is full" in err
    assert f"The result was saved to {saved_json}." in err
    saved_json.unlink()


# Item 2: names that need quoting in a URL.


def test_a_study_of_a_file_named_with_parentheses_and_unicode_is_found(tmp_path):
    from tfperf.report import load_snapshot
    from tfperf.study import StudyMismatchError
    from tfperf.study.storage import default_storage_url

    url = default_storage_url(Path('train(v2) é "x" <a>=b.py'), tmp_path / "studies")
    optuna.create_study(study_name="s", storage=url)
    # The file exists, so the report gets as far as the study (not "no study storage").
    with pytest.raises(StudyMismatchError, match="was not created by tfperf"):
        load_snapshot(url, None)


# Item 4: one Ctrl-C ends profile; --timeout.


@pytest.mark.tf
def test_one_ctrl_c_ends_profile_while_the_pipeline_blocks(write_pipeline, tmp_path):
    path = write_pipeline(HANGS)
    process = start_tfperf(tmp_path, "profile", str(path), "--quiet")
    try:
        _wait_for_worker(process)
        wait_for_file(process, path.with_name("blocking"))  # a cold start takes longer
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=HANG_S)
    except BaseException:
        _kill(process)
        raise
    assert process.returncode == 130, err
    assert "tfperf: interrupted." in err and "Traceback" not in err
    assert psutil.Process().children(recursive=True) == []


@pytest.mark.tf
def test_profile_timeout_says_no_batch_arrived(capsys, write_pipeline):
    path = write_pipeline(HANGS)
    status = main(["profile", str(path), "--timeout", "4", "--quiet"])
    err = capsys.readouterr().err
    assert status == EXIT_FAILED, err
    assert "pipeline.py: stopped after 4 s (--timeout): no batch ever arrived" in err
    assert psutil.Process().children(recursive=True) == []


# Item 5: SIGTERM.


@pytest.mark.tf
def test_sigterm_records_the_trial_as_interrupted_and_says_how_to_resume(write_pipeline, tmp_path):
    path = write_pipeline(HANGS)
    process = start_tfperf(tmp_path, "tune", str(path), "--trials", "2", "--quiet")
    try:
        _wait_for_worker(process)
        # The trial's own code has run: a child that merely looked like one (a subprocess the
        # zygote's imports start, before its exec) no longer sends the signal too early.
        wait_for_file(process, path.with_name("blocking"))
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=HANG_S)
    except BaseException:
        _kill(process)
        raise
    assert process.returncode == 143, err
    assert f"Resume with: tfperf tune {path} --trials 2 --quiet" in err
    url = f"sqlite:///{tmp_path}/studies/pipeline.db"
    study = optuna.load_study(study_name="pipeline", storage=url)
    assert [(t.state.name, t.user_attrs.get("status")) for t in study.trials] == [
        ("FAIL", "interrupted")
    ]


# Item 6: a full disk, a damaged study.


def test_a_full_disk_under_the_study_is_named(capsys, write_pipeline, small_tmpfs, tmp_path):
    from tests.mounts import fill

    url = f"sqlite:///{small_tmpfs}/study.db"
    optuna.create_study(study_name="earlier", storage=url)  # the tuner adds its own study
    fill(small_tmpfs)
    path = write_pipeline(pipelines.TRAIN_STEP)
    outputs = ["--json", str(tmp_path / "t.json"), "--html", str(tmp_path / "t.html")]
    status = main(["tune", str(path), "--storage", url, "--quiet", *outputs])
    err = capsys.readouterr().err
    assert status == EXIT_USAGE, err
    assert f"the disk holding {small_tmpfs}/study.db is full" in err
    assert "internal error" not in err
    (small_tmpfs / "filler").unlink()
    for summary in optuna.get_all_study_summaries(url):
        study = optuna.load_study(study_name=summary.study_name, storage=url)
        assert [t for t in study.trials if t.state.name == "RUNNING"] == []


def test_a_damaged_study_file_is_named_with_the_recovery(capsys, write_pipeline, tmp_path):
    database = tmp_path / "study.db"
    study = optuna.create_study(study_name="pipeline", storage=f"sqlite:///{database}")
    study.optimize(lambda trial: trial.suggest_float("x", 0, 1), n_trials=5)
    with database.open("r+b") as stream:  # every page but the first (the schema's root)
        for page in range(1, database.stat().st_size // 4096):
            stream.seek(page * 4096)
            stream.write(b"\xff" * 4096)
    path = write_pipeline(pipelines.TRAIN_STEP)
    status = main(["tune", str(path), "--storage", f"sqlite:///{database}", "--quiet"])
    err = capsys.readouterr().err
    assert status == EXIT_USAGE, err
    assert f"{database} is damaged (SQLite: database disk image is malformed)" in err
    assert f"sqlite3 {database} .recover" in err and "--study" in err


# Item 8: no trial completed.


@pytest.mark.tf
def test_when_no_trial_completes_the_tuner_stops_with_every_reason(
    capsys, write_pipeline, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    path = write_pipeline(HANGS)
    status = main(["tune", str(path), "--trials", "2", "--trial-timeout", "3", "--quiet"])
    err = capsys.readouterr().err
    assert status == EXIT_FAILED, err
    assert "no configuration of study 'pipeline' completed" in err
    assert "  trial 0: timeout: still running after 3 s (--trial-timeout)\n" in err
    assert "  trial 1: timeout: still running after 3 s (--trial-timeout)\n" in err
    assert "re-measuring" not in err
    assert (tmp_path / "reports" / "pipeline.html").is_file()
    study = optuna.load_study(study_name="pipeline", storage="sqlite:///studies/pipeline.db")
    assert [t.number for t in study.trials if t.state.name == "RUNNING"] == []


# Item 9: os._exit in the file.


def test_os_exit_while_imported_is_reported(write_pipeline, tmp_path):
    path = write_pipeline("import os\nos._exit(4)\n")
    completed = subprocess.run(
        [TFPERF, "profile", str(path)], cwd=tmp_path, capture_output=True, text=True, timeout=HANG_S
    )
    assert completed.returncode == EXIT_USAGE, completed.stderr
    assert f"{path} called os._exit(4) while tfperf imported it" in completed.stderr


# Item 10: what the pipeline leaves running.


@pytest.mark.tf
def test_profile_ends_despite_a_thread_and_stops_a_detached_process(write_pipeline, tmp_path):
    marker = f"left-by-{tmp_path.name}"
    path = write_pipeline(LEAVES_THINGS_RUNNING.replace("MARKER", marker))
    process = start_tfperf(tmp_path, "profile", str(path), "--steps", "2", "--no-stages", "--quiet")
    try:
        out, err = process.communicate(timeout=HANG_S)
    except BaseException:
        _kill(process)
        raise
    assert process.returncode == 0, err
    assert "Result JSON:" in out
    assert "tfperf: stopped processes the pipeline left running: pid " in err
    assert "time.sleep(3600)" in err
    assert _still_running(marker) == []


def _still_running(marker: str) -> list[int]:
    """Pids of live processes whose command line holds `marker`, after they had time to die.

    tfperf kills the helper before it exits; on a loaded host the killed process can take a
    moment to leave the process table, so the check waits for it (a hang guard, not a timing
    assertion) and then lists what is still alive.
    """
    found = [
        process
        for process in psutil.process_iter(["cmdline"])
        if marker in " ".join(process.info["cmdline"] or [])
    ]
    _, alive = psutil.wait_procs(found, timeout=30)
    running = []
    for process in alive:
        try:
            if process.status() != psutil.STATUS_ZOMBIE:
                running.append(process.pid)
        except psutil.NoSuchProcess:
            continue
    return running


# Item 11: smaller ones.


def test_colour_codes_are_dropped_when_stderr_is_not_a_terminal(capsys, write_pipeline):
    path = write_pipeline('raise ValueError("\\x1b[1;31mbad value\\x1b[0m")\n')
    status = main(["profile", str(path)])
    err = capsys.readouterr().err
    assert status == EXIT_USAGE
    assert "raised ValueError while tfperf imported it: bad value" in err
    assert "\x1b" not in err


def test_a_second_ctrl_c_during_the_report_still_leaves_the_resume_command(capsys, monkeypatch):
    from tfperf.cli import tune

    def interrupted_again(*args: object) -> Path:
        raise KeyboardInterrupt

    monkeypatch.setattr(tune, "write_study_report", interrupted_again)
    monkeypatch.setattr(sys, "argv", ["tfperf", "tune", "p.py"])
    outputs = tune._Outputs(json=Path("j"), html=Path("h"), patch=None)
    tuner = SimpleNamespace(storage_shown="sqlite:///studies/p.db")
    status = tune._interrupted(tuner, Exception("interrupted"), outputs)  # type: ignore[arg-type]
    err = capsys.readouterr().err
    assert status == 130
    assert "Resume with: tfperf tune p.py\n" in err
    assert "interrupted again; the report was not written" in err


def test_another_tuner_on_the_machine_is_warned_about(capsys, tmp_path):
    # A tuner as `ps` shows one: the interpreter running a script named tfperf, then `tune`.
    script = tmp_path / "tfperf"
    script.write_text("import time; time.sleep(60)\n")
    other = subprocess.Popen([sys.executable, str(script), "tune", "x.py"])
    try:
        from tfperf.cli.tune import warn_other_tuners

        assert other.pid in warn_other_tuners()
    finally:
        other.kill()
        other.wait()
    assert "another tfperf tuner is running on this machine" in capsys.readouterr().err


def test_the_tuners_own_wrapper_is_not_another_tuner():
    # `timeout 600 tfperf tune p.py` is one tuner: the wrapper's command line names it too.
    wrapper = (
        "import os, subprocess, sys; "
        "print(os.getpid()); "
        "print(subprocess.run([sys.executable, '-c', "
        "'from tfperf.cli.tune import warn_other_tuners; print(warn_other_tuners())'], "
        "capture_output=True, text=True, check=True).stdout)"
    )
    run = subprocess.run(
        [sys.executable, "-c", wrapper, "/usr/bin/tfperf", "tune", "x.py"],
        capture_output=True,
        text=True,
        check=True,
        timeout=HANG_S,
    )
    wrapper_pid, listed = run.stdout.split("\n")[:2]
    # Tuners of other tests may run beside this one: only the wrapper must be left out.
    assert int(wrapper_pid) not in ast.literal_eval(listed)


# Item 12: the test command installs what the suite needs.


def test_make_test_runs_the_system_deps_script_first():
    repo = Path(__file__).resolve().parents[2]
    completed = subprocess.run(
        # --no-print-directory: under CI this runs inside `make test`, where a nested make
        # would first print "make[1]: Entering directory ...".
        ["make", "-n", "--no-print-directory", "test"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    assert completed.stdout.splitlines()[0] == ".ci/system-deps"
    assert ".ci/system-deps" in (repo / ".ci" / "run").read_text()


@pytest.mark.parametrize(("uid", "expected_status"), [("1000", 1), ("0", 0)])
def test_system_deps_installs_or_says_how(tmp_path, uid, expected_status):
    repo = Path(__file__).resolve().parents[2]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "apt.log"
    fakes = {
        "id": f"#!/bin/sh\necho {uid}\n",
        "apt-get": f'#!/bin/sh\necho "$@" >> {log}\n',
        "make": "#!/bin/sh\n",  # present; chromium is not on this PATH
    }
    for name, text in fakes.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    for tool in ("bash", "cat"):
        (bin_dir / tool).symlink_to(subprocess.check_output(["which", tool], text=True).strip())
    completed = subprocess.run(
        [str(bin_dir / "bash"), str(repo / ".ci" / "system-deps")],
        env={"PATH": str(bin_dir)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == expected_status, completed.stderr
    if uid == "0":
        assert "install -y -qq --no-install-recommends chromium" in log.read_text()
    else:
        assert not log.exists()
        assert "need chromium fonts-liberation fonts-dejavu-core" in completed.stderr
        assert "needs root. Run once:  sudo bash -c 'apt-get update" in completed.stderr
