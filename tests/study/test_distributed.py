"""Several tuners on one study, as on a cluster: a real PostgreSQL server and a journal file.

Every test that shares a study runs twice: against a private PostgreSQL server on loopback
(`tests/postgres_server.py`, started once for the session) and against a journal file in a
local folder. Tuners are real processes: `tfperf tune` on a tiny pipeline where the test is
about real trials, and tuners with a fake trial runner where it is about races, since
instant trials make the tuners collide far more often than real ones would.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
import warnings
from collections import Counter
from pathlib import Path

import markupsafe
import optuna
import psutil
import pytest

from tests import pipelines
from tests.cli.console import TFPERF
from tests.deadlines import HANG_S
from tests.fakes.trials import FakeRunner
from tests.pipelines import TUNER_SOURCE as SOURCE
from tests.postgres_server import PostgresServer, free_port
from tfperf.pipeline import load_pipeline
from tfperf.study import StudyMismatchError, search_trials
from tfperf.study._cluster import counted, finished_count
from tfperf.study._records import LOCK_ROLE
from tfperf.study.cluster import Liveness, LostTrial
from tfperf.study.storage import StorageError, open_storage
from tfperf.tuner import TuneListener, TuneOptions, Tuner

REPO = Path(__file__).resolve().parents[2]
# Short heartbeats so that a silent tuner is noticed within seconds, not minutes.
LIVENESS_ENV = {"TFPERF_HEARTBEAT_S": "1", "TFPERF_GRACE_S": "3"}
BACKENDS = ["postgresql", "journal"]


@pytest.fixture(params=BACKENDS)
def storage_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty storage: a new PostgreSQL database, or a journal file."""
    if request.param == "journal":
        return f"journal://{tmp_path.as_posix()}/study.log"
    server: PostgresServer = request.getfixturevalue("postgres")
    return server.create_database(f"t{uuid.uuid4().hex[:12]}")


def load(url: str, name: str = "shared") -> optuna.Study:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return optuna.load_study(study_name=name, storage=open_storage(url))


def all_trials(url: str, name: str = "shared") -> list[optuna.trial.FrozenTrial]:
    """The study's trials; empty while no tuner has created it."""
    try:
        return load(url, name).get_trials(deepcopy=False)
    except KeyError:
        return []


def start_tune(path: Path, url: str, cwd: Path, *args: str) -> subprocess.Popen[str]:
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [
            *(TFPERF, "tune", str(path), "--storage", url, "--study", "shared"),
            *("--steps", "8", "--warmup", "2", "--quiet", "--seed", "3", "--no-prune"),
            *("--rounds", "1", "--finalists", "1"),
            *args,
        ],
        cwd=cwd,
        env={**os.environ, **LIVENESS_ENV, "TF_CPP_MIN_LOG_LEVEL": "3"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen[str], timeout: float = HANG_S) -> tuple[str, str]:
    """Waits for a tuner that must succeed; kills it (and fails) when it hangs."""
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(process)
        out, err = process.communicate()
        raise AssertionError(f"still running after {timeout} s:\n{err[-3000:]}") from None
    assert process.returncode == 0, err
    return out, err


def lock_trials(trials: list[optuna.trial.FrozenTrial]) -> list[optuna.trial.FrozenTrial]:
    return [t for t in trials if t.user_attrs.get("role") == LOCK_ROLE]


def assert_one_study(
    trials: list[optuna.trial.FrozenTrial], budget: int, remeasurements: int = 1
) -> None:
    """Exactly `budget` counted trials, all finished; references once; no knobs run twice;
    one re-measurement per run of the tuners."""
    assert finished_count(trials) == budget
    # Trials claimed beyond the budget by tuners that raced for the last slot were given back.
    assert {t.state.name for t in counted(trials)[budget:]} <= {"WAITING"}
    # The references were queued once (a retry of a lost reference is not a second copy).
    labels = Counter(
        t.user_attrs.get("reference") for t in trials if "retry_of" not in t.user_attrs
    )
    assert labels["baseline"] == 1 and labels["autotune"] == 1
    assert [t.number for t in trials if t.state.name == "RUNNING"] == []
    measured = [
        json.dumps(t.user_attrs["knobs"], sort_keys=True)
        for t in counted(trials)[:budget]
        if "duplicate_of" not in t.user_attrs
    ]
    assert len(measured) == len(set(measured))
    # One lock held each re-measurement; any other lock lost the race and ran nothing.
    held = [t for t in lock_trials(trials) if "another tuner" not in t.user_attrs["reason"]]
    assert len(held) == remeasurements


@pytest.mark.tf
def test_tuners_on_several_machines_share_one_study(storage_url, write_pipeline, tmp_path):
    """Three `tfperf tune` started at once; one dies mid-trial (SIGKILL to it and its trial,
    as in a power loss); the other two finish the study exactly, and agree on the result."""
    path = write_pipeline(pipelines.PARALLEL_SENSITIVE)
    tuners = [start_tune(path, storage_url, tmp_path / f"m{i}", "--trials", "3") for i in range(3)]
    victim, killed = first_running_trial(storage_url, tuners)
    kill_tree(victim)
    survivors = [tuner for tuner in tuners if tuner is not victim]
    outputs = [finish(tuner) for tuner in survivors]

    study = load(storage_url)
    trials = study.get_trials(deepcopy=False)
    assert_one_study(trials, budget=3)
    dead = next(t for t in trials if t.number == killed)
    assert dead.state.name == "FAIL" and dead.user_attrs["lost"] is True
    assert dead.user_attrs["status"] == "interrupted"
    assert dead.user_attrs["reason"].startswith(("orphaned:", "stale:"))
    (retry,) = [t for t in trials if t.user_attrs.get("retry_of") == killed]
    # The retry takes the next number: where the survivors had already queued proposals for
    # every slot, it falls beyond the budget and waits, like them, for a run with more trials.
    budget_numbers = {t.number for t in counted(trials)[:3]}
    assert retry.state.name == ("COMPLETE" if retry.number in budget_numbers else "WAITING")
    assert retry.user_attrs["knobs"] == dead.user_attrs["knobs"]
    # Reported as it happened, or on opening the study by a tuner that started later.
    said = (f"Trial {killed} failed: ", f"failed lost trials [{killed}]")
    assert any(text in err for _, err in outputs for text in said)

    pids = {tuner.pid for tuner in tuners}
    # A trial queued beyond the budget (tfperf's estimate, when the other tuners had claimed
    # every slot by the time the baseline's model existed) waits for a later run: no worker.
    for trial in [t for t in search_trials(study) if t.state.name != "WAITING"]:
        worker = trial.user_attrs["worker"]
        assert worker["pid"] in pids
        assert worker["cpu_count"] >= 1 and worker["cpu_model"] and worker["tf_version"]
    remeasured_by = study.user_attrs["tfperf_remeasured_by"]
    assert remeasured_by["worker"]["pid"] in {tuner.pid for tuner in survivors}
    assert remeasured_by["trials"] == 3
    # Both survivors print the same final figures; the one that did not measure them says so.
    bests = {out.splitlines()[0] for out, _ in outputs}
    assert len(bests) == 1 and next(iter(bests)).startswith("Best: ")
    assert sum("re-measured by" in err for _, err in outputs) == 1
    (printed,) = {
        line.removeprefix("Recommendation: ")
        for out, _ in outputs
        for line in out.splitlines()
        if line.startswith("Recommendation: ")
    }
    assert_report_from_storage(storage_url, tmp_path, len(search_trials(study)), printed)


def assert_report_from_storage(url: str, cwd: Path, trials: int, recommendation: str) -> None:
    """`tfperf report` from any machine shows the whole study, without its credentials."""
    completed = subprocess.run(
        [TFPERF, "report", "--storage", url, "--study", "shared"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=HANG_S,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    html = (cwd / "reports" / "shared.html").read_text()
    assert html.count("<tr data-host=") == trials
    # The page recommends what the tuners printed (Jinja escapes quotes as markupsafe does).
    assert f'<div class="banner-headline">{markupsafe.escape(recommendation)}</div>' in html
    assert_no_password(completed.stdout + completed.stderr + html)


def test_a_silent_machine_s_trial_is_failed_by_heartbeat(storage_url, write_pipeline):
    """A trial held by a tuner on another machine that stops beating (the machine died)."""
    path = write_pipeline(SOURCE)
    fake_tuner(path, storage_url, trials=3).run()
    holder = subprocess.Popen(
        [sys.executable, "-c", FOREIGN_TRIAL, storage_url],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        text=True,
    )
    silent = int(holder.stdout.readline())  # type: ignore[union-attr]
    kill_tree(holder)

    listener = Recorder()
    fake_tuner(path, storage_url, trials=5, listener=listener).run()
    trials = all_trials(storage_url)
    assert_one_study(trials, budget=5, remeasurements=2)
    dead = next(t for t in trials if t.number == silent)
    assert dead.state.name == "FAIL" and dead.user_attrs["lost"] is True
    assert dead.user_attrs["reason"].startswith("stale: no heartbeat from its tuner (pid 4242")
    assert "on far-away-host" in dead.user_attrs["reason"]
    assert [lost.number for lost in listener.lost] == [silent]
    retry = next(t for t in trials if t.user_attrs.get("retry_of") == silent)
    assert retry.state.name == "COMPLETE"
    # The silent machine had another CPU: the study mixes hardware, and the tuner says so.
    (groups,) = listener.mixed
    assert groups["64 CPUs (Some Other CPU), no GPU, TensorFlow 2.16.1"] == ["far-away-host"]


@pytest.mark.parametrize("tuners", [6])
def test_many_tuners_started_at_once_keep_the_budget_exact(storage_url, write_pipeline, tuners):
    path = write_pipeline(SOURCE)
    summaries = run_fake_tuners(storage_url, path, tuners=tuners, trials=12)

    trials = all_trials(storage_url)
    assert_one_study(trials, budget=12)
    assert sum(s["trials_this_run"] for s in summaries) == 12
    assert [t.number for t in trials if t.user_attrs.get("role") == "duplicate"] == []
    assert len({json.dumps(s["best"], sort_keys=True) for s in summaries}) == 1
    assert sum(s["remeasured_here"] for s in summaries) == 1


# --- clear messages from a real server ------------------------------------------------------


def test_unreachable_server_names_it_and_hides_the_password(postgres):
    message = storage_message(postgres.url("nope", port=free_port()))
    assert "cannot reach the database server at 127.0.0.1:" in message
    assert_no_password(message)


def test_wrong_password_is_an_authentication_error(postgres):
    postgres.create_database("auth")
    message = storage_message(postgres.url("auth", password="not-the-Pa55word"))
    assert "authentication failed for user 'tfperf' at 127.0.0.1:" in message
    assert "Check the user name and password in the URL." in message
    assert_no_password(message, "not-the-Pa55word")


def test_missing_database_says_how_to_create_it(postgres):
    message = storage_message(postgres.url("no_such_db"))
    assert "has no database 'no_such_db'" in message
    assert "CREATE DATABASE no_such_db;" in message
    assert_no_password(message)


def test_missing_driver_names_the_package(postgres):
    url = postgres.url("drivers").replace("+psycopg2", "+pg8000")
    message = storage_message(url)
    assert "the postgresql driver 'pg8000' is not installed" in message
    assert "pip install pg8000" in message
    assert_no_password(message)


def test_a_url_without_driver_reaches_the_server(postgres):
    url = postgres.create_database("plain").replace("+psycopg2", "")
    assert isinstance(open_storage(url), optuna.storages.RDBStorage)


def test_study_of_another_tool_is_refused(postgres, write_pipeline, tmp_path):
    url = postgres.create_database("other_tool")
    study = optuna.create_study(storage=url, study_name="shared")
    study.optimize(lambda trial: trial.suggest_float("x", 0, 1), n_trials=1)
    with pytest.raises(StudyMismatchError, match="was not created by tfperf") as caught:
        fake_tuner(write_pipeline(SOURCE), url).open_study()
    assert_no_password(str(caught.value))


def test_study_of_another_pipeline_is_refused(postgres, write_pipeline):
    url = postgres.create_database("other_pipeline")
    fake_tuner(write_pipeline(SOURCE), url).open_study()
    other = write_pipeline(SOURCE, name="other.py")
    with pytest.raises(StudyMismatchError, match=r"tunes pipeline\.py, not other\.py"):
        fake_tuner(other, url).open_study()


@pytest.mark.tf
def test_cli_wrong_password_exits_2_without_credentials(postgres, write_pipeline, tmp_path):
    postgres.create_database("cli")
    path = write_pipeline(pipelines.PARALLEL_SENSITIVE)
    url = postgres.url("cli", password="hunter2-Wrong")
    tuner = start_tune(path, url, tmp_path / "cli", "--trials", "2")
    out, err = tuner.communicate(timeout=HANG_S)
    assert tuner.returncode == 2
    assert "authentication failed for user 'tfperf'" in err
    assert_no_password(out + err, "hunter2-Wrong")


# --- helpers ----------------------------------------------------------------------------------

# A tuner process with a fake trial runner: trials are instant, so tuners race hard.
FAKE_TUNER = textwrap.dedent(
    """
    import dataclasses, json, sys
    from tests.fakes.trials import FakeRunner
    from tfperf.pipeline import load_pipeline
    from tfperf.tuner import TuneListener, TuneOptions, Tuner

    class Record(TuneListener):
        lost, mixed, remeasured_here = [], [], False
        def trial_lost(self, lost): self.lost.append(lost.number)
        def hardware_mixed(self, groups): self.mixed.append(dict(groups))
        def remeasure_started(self, finalists, rounds): Record.remeasured_here = True

    url, path, trials = sys.argv[1], sys.argv[2], int(sys.argv[3])
    options = TuneOptions(
        trials=trials, storage=url, study_name="shared", rounds=1, finalists=1, prune=False
    )
    listener = Record()
    result = Tuner(load_pipeline(path), options, listener, runner=FakeRunner()).run()
    print(json.dumps({
        "trials_this_run": result.trials_this_run, "best": result.best.knobs.to_dict(),
        "lost": listener.lost, "hardware_mixed": listener.mixed,
        "remeasured_here": Record.remeasured_here,
    }))
    """
)

# Joins the study as a tuner on another machine would, takes a trial, beats for it, and
# prints its number; the test then kills it, and its heartbeats stop.
FOREIGN_TRIAL = textwrap.dedent(
    """
    import sys, threading, warnings
    warnings.simplefilter("ignore")  # Optuna's notes on its experimental heartbeat
    import optuna
    from tfperf.study._cluster import Heartbeats
    from tfperf.study.cluster import Liveness
    from tfperf.study.storage import open_storage

    study = optuna.load_study(study_name="shared", storage=open_storage(
        sys.argv[1], heartbeat_interval=1, grace_period=3))
    trial = study.ask()
    trial.set_user_attr("knobs", {"batch_size": 8, "num_parallel_calls": 3})
    trial.set_user_attr("worker", {
        "host": "far-away-host", "pid": 4242, "started": 0.0, "pid_scope": "elsewhere",
        "cpu_model": "Some Other CPU", "cpu_count": 64, "gpu_model": None, "tf_version": "2.16.1",
    })
    with Heartbeats(study, Liveness(1, 3)).keep(trial._trial_id):
        print(trial.number, flush=True)
        threading.Event().wait()
    """
)


def run_fake_tuners(url: str, path: Path, tuners: int, trials: int) -> list[dict]:
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", FAKE_TUNER, url, str(path), str(trials)],
            cwd=REPO,
            env={**os.environ, **LIVENESS_ENV, "PYTHONPATH": str(REPO)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(tuners)
    ]
    outputs = [finish(process, timeout=HANG_S) for process in processes]
    return [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]


class Recorder(TuneListener):
    def __init__(self) -> None:
        self.lost: list[LostTrial] = []
        self.mixed: list[dict] = []

    def trial_lost(self, lost: LostTrial) -> None:
        self.lost.append(lost)

    def hardware_mixed(self, groups) -> None:
        self.mixed.append(dict(groups))


def fake_tuner(
    path: Path, url: str, trials: int = 3, listener: TuneListener | None = None
) -> Tuner:
    options = TuneOptions(
        trials=trials,
        storage=url,
        study_name="shared",
        rounds=1,
        finalists=1,
        prune=False,
        liveness=Liveness(heartbeat_s=1, grace_s=3),
    )
    return Tuner(load_pipeline(path), options, listener, runner=FakeRunner())


def first_running_trial(
    url: str, tuners: list[subprocess.Popen[str]], timeout: float = HANG_S
) -> tuple[subprocess.Popen[str], int]:
    """The first tuner seen measuring a trial (its knobs chosen), and that trial's number."""
    by_pid = {tuner.pid: tuner for tuner in tuners}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for trial in all_trials(url):
            pid = (trial.user_attrs.get("worker") or {}).get("pid")
            running = trial.state.name == "RUNNING" and "knobs" in trial.user_attrs
            if running and pid in by_pid and not trial.user_attrs.get("role"):
                return by_pid[pid], trial.number
        time.sleep(0.2)
    raise AssertionError(f"no tuner started a trial within {timeout} s")


def kill_tree(process: subprocess.Popen) -> None:
    """SIGKILL to a process and every descendant (a trial runs in its own session)."""
    family = psutil.Process(process.pid).children(recursive=True)
    os.kill(process.pid, signal.SIGKILL)
    for child in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.send_signal(signal.SIGKILL)
    process.wait(timeout=HANG_S)


def storage_message(url: str) -> str:
    with pytest.raises(StorageError) as caught:
        open_storage(url)
    return str(caught.value)


def assert_no_password(text: str, *others: str) -> None:
    from tests.postgres_server import PASSWORD

    for secret in (PASSWORD, *others):
        assert secret not in text
