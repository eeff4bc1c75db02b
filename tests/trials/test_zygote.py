"""Trials forked from one zygote (`tfperf.trials.forked_trials`): each still a process of its
own, in a session of its own, killed with its group, and nothing left when the study ends."""

from __future__ import annotations

import logging
import os
import signal
import sys

import psutil
import pytest

from tests.trials.test_runner import (
    HANGS,
    KILLS_ITSELF,
    SHARES_WITH_WORKERS,
    TINY,
    _gone,
    _request,
    _write,
)
from tfperf.knobs import Knobs
from tfperf.results import TrialStatus
from tfperf.trials import Budgets, TrialRequest, forked_trials, run_trial
from tfperf.trials._zygote import active

# TINY, and the trial's parent, session and pid written beside the file.
TELLS_ITS_PARENT = (
    TINY
    + """
import os, pathlib

pathlib.Path(__file__).with_name("parent").write_text(
    f"{os.getppid()} {os.getsid(0)} {os.getpid()}"
)
"""
)


def _zygote_pid() -> int:
    zygote = active(sys.executable)
    assert zygote is not None and zygote._process is not None
    return zygote._process.pid


def _only_the_zygote_left() -> None:
    assert [child.pid for child in psutil.Process().children(recursive=True)] == [_zygote_pid()]


@pytest.mark.tf
def test_each_trial_is_a_fork_of_the_zygote_in_a_session_of_its_own(tmp_path):
    with forked_trials(("tensorflow", "keras")):
        tells = []
        for run in ("first", "second"):
            path = _write(tmp_path / run, TELLS_ITS_PARENT)
            outcome = run_trial(_request(path), Budgets(timeout_s=120))
            assert outcome.status is TrialStatus.COMPLETE, outcome.reason
            assert outcome.result is not None and outcome.result.end_to_end.steps == 5
            tells.append((tmp_path / run / "parent").read_text().split())
            _only_the_zygote_left()
        zygote = _zygote_pid()
    (parent, session, pid), (parent_2, _, pid_2) = tells
    assert int(parent) == int(parent_2) == zygote  # both forked, by the one zygote
    assert session == pid and pid != pid_2
    assert psutil.Process().children(recursive=True) == []  # the zygote left with the study


@pytest.mark.tf
def test_a_forked_trials_peak_ram_reads_as_a_fresh_interpreters(tmp_path):
    """Without its library pages mapped in again, a fork's RSS would leave out the hundreds
    of MiB of TensorFlow's that a fresh interpreter's import touches."""
    path = _write(tmp_path, TINY)
    fresh = run_trial(_request(path), Budgets(timeout_s=120))
    with forked_trials(("tensorflow", "keras")):
        forked = run_trial(_request(path), Budgets(timeout_s=120))
    assert fresh.status is forked.status is TrialStatus.COMPLETE, (fresh.reason, forked.reason)
    assert abs(forked.peak_rss_bytes - fresh.peak_rss_bytes) < 0.15 * fresh.peak_rss_bytes


def test_present_pages_are_read_in_runs():
    from tfperf.trials._zygote import _present_runs

    present, absent = 1 << 63, 0
    entries = [present, present, absent, present, absent, absent, present]
    assert _present_runs(entries, 4096, 4096) == [(4096, 12288), (16384, 20480), (28672, 32768)]


@pytest.mark.tf
def test_a_forked_trial_past_its_timeout_is_killed_with_its_group(tmp_path):
    path = _write(tmp_path, HANGS)
    with forked_trials(("tensorflow", "keras")):
        timeout_s = 8
        while True:  # as in test_runner: the limit must fire after the helper started
            outcome = run_trial(_request(path), Budgets(timeout_s=timeout_s))
            if (tmp_path / "helper.pid").exists() or timeout_s >= 120:
                break
            timeout_s *= 2
        assert outcome.status is TrialStatus.TIMEOUT
        assert _gone(int((tmp_path / "helper.pid").read_text()))
        _only_the_zygote_left()


@pytest.mark.tf
def test_a_forked_trial_killed_by_a_signal_is_a_crash_naming_it(tmp_path):
    with forked_trials(("tensorflow", "keras")):
        outcome = run_trial(_request(_write(tmp_path, KILLS_ITSELF)), Budgets(timeout_s=120))
    assert outcome.status is TrialStatus.CRASHED
    assert "SIGKILL" in outcome.reason


@pytest.mark.tf
def test_a_lost_zygote_starts_the_next_trial_afresh(tmp_path, caplog):
    path = _write(tmp_path, TINY)
    with forked_trials(("tensorflow", "keras")):
        assert run_trial(_request(path), Budgets(timeout_s=120)).status is TrialStatus.COMPLETE
        os.kill(_zygote_pid(), signal.SIGKILL)
        psutil.Process(_zygote_pid()).wait(30)
        with caplog.at_level(logging.WARNING, logger="tfperf.trials._runner"):
            outcome = run_trial(_request(path), Budgets(timeout_s=120))
    assert outcome.status is TrialStatus.COMPLETE, outcome.reason
    assert "starting this trial afresh: the zygote exited" in caplog.text
    assert psutil.Process().children(recursive=True) == []


def test_the_dataloaders_workers_fork_from_a_forked_trial(tmp_path):
    pytest.importorskip("torch")
    path = _write(tmp_path, SHARES_WITH_WORKERS)
    request = TrialRequest(path, Knobs(batch_size=4, num_workers=3), steps=6, warmup=1)
    with forked_trials(("torch",)):
        outcome = run_trial(request, Budgets(timeout_s=120))
        _only_the_zygote_left()
    assert outcome.status is TrialStatus.COMPLETE, outcome.reason
    assert outcome.peak_rss_bytes > 160 * 10**6  # the trainer's array counts, once


def test_nothing_to_preload_forks_nothing():
    with forked_trials(()):
        assert active(sys.executable) is None
    with forked_trials(("json",)):
        zygote = active(sys.executable)
        assert zygote is not None and active("/other/python") is None
        assert zygote._process is None  # not started before the first trial asks for it
    assert active(sys.executable) is None


def test_the_zygote_starts_at_once_and_serves_a_nested_forked_trials_of_its_modules():
    with forked_trials(("json",), at_once=True):
        outer = active(sys.executable)
        _only_the_zygote_left()  # started before any trial, its imports under way
        with forked_trials(("json",), at_once=True):
            assert active(sys.executable) is outer  # the caller's zygote serves
        assert active(sys.executable) is outer and outer is not None and not outer.lost
        _only_the_zygote_left()  # still running: the inner block closed nothing
        with forked_trials(("csv",)):
            assert active(sys.executable) is not outer  # other modules: a zygote of its own
    assert psutil.Process().children(recursive=True) == []


@pytest.mark.tf
def test_a_zygote_sent_no_trial_is_killed_at_once_not_waited_for():
    # A command that stops before its first trial.
    with forked_trials(("tensorflow", "keras"), at_once=True):
        zygote = active(sys.executable)
        assert zygote is not None and zygote._process is not None
        process = zygote._process
    assert process.returncode == -signal.SIGKILL  # still importing: killed, not waited for
    assert psutil.Process().children(recursive=True) == []
