"""The study report's data: a real Optuna study read into a snapshot, then each chart's record."""

from __future__ import annotations

import optuna
import pytest

from tests.reports import MIB, PLAN, RAM_BUDGET, Planned, fake_profile, make_study
from tfperf.knobs import Knobs
from tfperf.report import _knob_charts as kc
from tfperf.report import _study_charts as sc
from tfperf.report import _study_summary as ss
from tfperf.report import load_snapshot, render_study_html
from tfperf.report._study_data import StudySnapshot, snapshot_study
from tfperf.study import StudyMismatchError
from tfperf.study.storage import StorageError


@pytest.fixture(scope="module")
def snapshot() -> StudySnapshot:
    return snapshot_study(make_study(best_result=fake_profile()), "memory")


def test_snapshot_copies_every_trial(snapshot):
    assert [row.number for row in snapshot.trials] == list(range(len(PLAN)))
    assert [row.status for row in snapshot.trials] == [p.status for p in PLAN]
    assert [row.feasible for row in snapshot.trials] == [True, True, True, True, False, False, True]
    failed = snapshot.trials[5]
    assert (failed.state, failed.examples_per_sec, failed.reason) == ("FAIL", None, "boom")
    assert snapshot.trials[4].examples_per_sec is None  # over budget: its 0.0 is not a figure
    assert snapshot.trials[0].reference == "baseline"
    assert snapshot.trials[0].host == "node-a"


def test_snapshot_recovers_budget_best_trial_and_its_profile(snapshot):
    assert snapshot.ram_budget_bytes == RAM_BUDGET
    assert snapshot.gpu_budget_bytes is None
    assert snapshot.best_trial == 2
    assert snapshot.best_result is not None and snapshot.best_result.pipeline == "demo.py"
    assert snapshot.remeasured
    assert snapshot.pipeline == "demo.py" and snapshot.objective == "throughput"


def test_importances_need_enough_trials():
    small = snapshot_study(make_study(plan=PLAN[:2], remeasure=False), "memory")
    assert small.importances == {}
    assert small.importance_note == "needs at least 4 completed trials; the study has 2"


def test_summary_compares_best_with_both_references(snapshot):
    summary = ss.summary(snapshot)
    assert summary is not None
    assert [(r.role, r.label, r.median, r.runs) for r in summary.rows] == [
        ("best", "best: trial 2", 2000.0, 3),
        ("baseline", "your baseline", 1000.0, 3),
        ("autotune", "everything AUTOTUNE", 1500.0, 3),
    ]
    # The fastest changes the batch size, for a gain well beyond noise: it stays the answer,
    # in amber (training changes).
    assert summary.banner.level == "warn"
    assert summary.vs_baseline is not None and summary.vs_baseline.ratio == pytest.approx(2.0)
    assert summary.vs_autotune is not None and summary.vs_autotune.ratio == pytest.approx(4 / 3)
    assert summary.recommendation.startswith("Use trial 2's knobs: 2.00x")
    assert summary.remeasured


def test_summary_diff_and_warning_when_batch_size_changes(snapshot):
    summary = ss.summary(snapshot)
    assert summary is not None
    assert [(c.name, c.baseline, c.best, c.changes_training) for c in summary.changes] == [
        ("batch_size", "32", "64", True),
        ("num_parallel_calls", "1", "4", False),
        ("cycle_length", "1", "AUTOTUNE", False),
        ("prefetch", "0", "2", False),
    ]
    assert len(summary.warnings) == 1
    assert summary.warnings[0].startswith("The winner changes the batch size (32 → 64)")
    assert "ds = ds.batch(64)" in summary.tf_data_code
    assert "'batch_size': 64," in summary.baseline_code


def test_summary_before_remeasurement_uses_single_runs_and_says_so():
    snapshot = snapshot_study(make_study(remeasure=False), "memory")
    summary = ss.summary(snapshot)
    assert summary is not None and not summary.remeasured
    assert [(r.label, r.median, r.runs) for r in summary.rows] == [
        ("best: trial 2", 2000.0, 1),
        ("your baseline", 1000.0, 1),
        ("everything AUTOTUNE", 1500.0, 1),
    ]
    assert "not yet re-measured" in summary.recommendation


def test_summary_is_none_when_nothing_completed():
    plan = (Planned(Knobs(), None, "failed", reason="boom"),)
    assert ss.summary(snapshot_study(make_study(plan=plan, remeasure=False), "m")) is None


def test_history_tracks_best_feasible_so_far(snapshot):
    history = sc.history(snapshot)
    assert [p.number for p in history.points] == [0, 1, 2, 3, 6]  # trial 4 stopped before any rate
    assert [p.kind for p in history.points] == [
        "baseline",
        "AUTOTUNE",
        "search",
        "search",
        "search",
    ]
    assert [p.examples_per_sec for p in history.points] == [1000.0, 1500.0, 2000.0, 1800.0, 1200.0]
    # Re-measured trials are drawn at their median with half their range as an error bar.
    assert [p.error for p in history.points] == [10.0, 100.0, 100.0, 0.0, 0.0]
    assert history.best_so_far == (1000.0, 1500.0, 2000.0, 2000.0, 2000.0)
    assert history.recommended == 2
    assert history.points[3].hover == (
        "trial 3 · 1,800 examples/s (one run) · batch_size=32 · shuffle_buffer=1024 · "
        "num_parallel_calls=2 · cycle_length=AUTOTUNE · num_parallel_reads=AUTOTUNE · "
        "prefetch=AUTOTUNE · mixed_precision=float32 · deterministic=not set · "
        "private_threadpool_size=not set"
    )
    figure = sc.history_figure(history)
    names = [trace.name for trace in figure.data]
    assert names == ["trial", "trial (baseline)", "trial (AUTOTUNE)", "best so far"]
    assert figure.layout.yaxis.title.text == "examples/s"
    assert figure.layout.xaxis.tickformat == "d"
    assert figure.data[0].hovertemplate == "%{hovertext}<extra></extra>"


def test_pruned_trials_are_drawn_at_the_rate_they_reached():
    study = make_study(plan=PLAN[:4], remeasure=False)
    trial = optuna.trial.create_trial(
        state=optuna.trial.TrialState.PRUNED,
        params={},
        distributions={},
        intermediate_values={10: 400.0, 20: 559.0},
        user_attrs={"knobs": Knobs(batch_size=8).to_dict(), "status": "pruned"},
    )
    study.add_trial(trial)
    snapshot = snapshot_study(study, "memory")
    assert snapshot.trials[4].reached_examples_per_sec == 559.0
    point = sc.history(snapshot).points[-1]
    assert (point.number, point.kind, point.examples_per_sec) == (4, "pruned", 559.0)
    assert "x-open" in [
        trace.marker.symbol for trace in sc.history_figure(sc.history(snapshot)).data
    ]
    assert '559 <span class="muted">(pruned)</span>' in render_study_html(snapshot)


def test_ram_tradeoff_front_and_budget(snapshot):
    data = sc.ram_tradeoff(snapshot)
    assert data.front_numbers == (3, 2)  # 380 MiB at 1800/s, then 450 MiB at 2000/s
    assert data.budget_mib == RAM_BUDGET / MIB
    assert [p.number for p in data.points] == [0, 1, 2, 3, 6]
    assert data.peak_rss_mib == (400.0, 420.0, 450.0, 380.0, 600.0)
    figure = sc.ram_figure(data)
    assert figure.layout.xaxis.title.text == "peak host RAM (MiB)"
    assert "Pareto front" in [trace.name for trace in figure.data]
    assert any("RAM budget" in (a.text or "") for a in figure.layout.annotations)


def test_host_groups_and_mixed_hardware():
    plan = tuple(
        Planned(p.knobs, p.examples_per_sec, p.status, reference=p.reference, host=host)
        for p, host in zip(PLAN[:4], ("a", "b", "a", "b"), strict=True)
    )
    snapshot = snapshot_study(make_study(plan=plan), "m")
    groups = sc.host_groups(snapshot)
    assert [(g.host, g.trials, g.best_examples_per_sec) for g in groups] == [
        ("a", 2, 2000.0),
        ("b", 2, 1800.0),
    ]
    assert not sc.mixed_hardware(groups)
    mixed = (
        sc.HostGroup("a", "cpu_model=EPYC", 1, None),
        sc.HostGroup("b", "cpu_model=Xeon", 1, None),
    )
    assert sc.mixed_hardware(mixed)


def test_load_snapshot_from_sqlite_picks_the_only_study(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    make_study(storage=url, name="p")
    assert load_snapshot(url, None).study_name == "p"
    make_study(storage=url, name="q")
    with pytest.raises(StudyMismatchError, match=r"holds 2 studies \(p, q\); name one"):
        load_snapshot(url, None)
    with pytest.raises(StudyMismatchError, match=r"no study named 'r'.*studies there: p, q"):
        load_snapshot(url, "r")


def test_load_snapshot_refuses_a_missing_file_without_creating_it(tmp_path):
    missing = tmp_path / "none.db"
    with pytest.raises(StorageError, match="no study storage at"):
        load_snapshot(f"sqlite:///{missing}", None)
    assert not missing.exists()


def test_load_snapshot_refuses_a_study_tfperf_did_not_make(tmp_path):
    url = f"sqlite:///{tmp_path / 'other.db'}"
    study = optuna.create_study(storage=url, study_name="other")
    study.optimize(lambda trial: trial.suggest_float("x", 0, 1), n_trials=2)
    with pytest.raises(StudyMismatchError, match=r"'other' .* was not created by tfperf"):
        load_snapshot(url, "other")


def test_a_study_of_call_sites_shows_each_site_as_a_knob():
    site = "map@train.py:12.num_parallel_calls"
    batch = "batch@train.py:13.batch_size"

    def knobs(calls: int, size: int) -> Knobs:
        return Knobs.from_mapping({site: calls, batch: size})

    plan = (
        Planned(knobs(1, 32), 1000.0, reference="baseline"),
        Planned(knobs(-1, 32), 1500.0, reference="autotune"),
        Planned(knobs(4, 64), 2000.0),
        Planned(knobs(2, 32), 1800.0),
        Planned(knobs(8, 16), 1200.0),
    )
    snapshot = snapshot_study(make_study(plan=plan, remeasure=False), "memory")
    summary = ss.summary(snapshot)
    assert summary is not None
    assert [(c.name, c.baseline, c.best, c.changes_training) for c in summary.changes] == [
        (batch, "32", "64", True),
        (site, "1", "4", False),
    ]
    assert summary.baseline_code == "" and summary.tf_data_code == ""
    assert summary.warnings == (
        f"The winner changes {batch} (32 → 64), a batch size or shuffle buffer in your code: "
        "this alters training, not only speed. Check accuracy before adopting it.",
    )
    assert [axis.label for axis in kc.parallel_view(snapshot).axes] == [batch, site]
    html = render_study_html(snapshot)
    # The heading may wrap at the name's joints (`breakable`), so it reads the same.
    heading = batch.replace("@", "@<wbr>").replace("n.", "n.<wbr>").replace(":", ":<wbr>")
    heading = heading.replace("13.", "13.<wbr>").replace("_", "_<wbr>")
    assert f'<th data-sort="text" tabindex="0">{heading}</th>' in html
    assert "Apply it as a patch" in html


def test_a_study_of_a_plain_file_carries_its_sites_slow_stage_and_patch(tmp_path):
    from tfperf.results._discovery import SlowStage
    from tfperf.results.discovery import ArgumentForm, CallSite, Discovery
    from tfperf.study.records import StudyRecord, write_study

    (tmp_path / "train.py").write_text(
        "import tensorflow as tf\n"
        "ds = tf.data.Dataset.range(8)\n"
        "ds = ds.map(lambda x: x, num_parallel_calls=1)\n",
        encoding="utf-8",
    )
    name = "map@train.py:3.num_parallel_calls"
    site = CallSite(name, "train.py", 3, None, None, None, "map", "num_parallel_calls",
                    ArgumentForm.KEYWORD, None, 1)  # fmt: skip
    discovery = Discovery(
        sites=(site,), slowest=SlowStage("map(<lambda>)", "train.py:3", 0.002, (name,))
    )
    plan = (
        Planned(Knobs.from_mapping({name: 1}), 1000.0, reference="baseline"),
        Planned(Knobs.from_mapping({name: -1}), 1500.0, reference="autotune"),
        Planned(Knobs.from_mapping({name: 4}), 2000.0),
    )
    study = make_study(plan=plan, remeasure=False)
    write_study(study, StudyRecord(discovery=discovery, code_root=str(tmp_path)))
    snapshot = snapshot_study(study, "memory")
    assert snapshot.discovery == discovery and snapshot.code_root == tmp_path
    summary = ss.summary(snapshot)
    assert summary is not None and summary.patch is not None
    assert "+ds = ds.map(lambda x: x, num_parallel_calls=4)" in summary.patch.diff
    html = render_study_html(snapshot)
    costliest = "The costliest stage of your input pipeline as written, run alone: map(&lt;"
    assert costliest in html
    assert "num_parallel_calls=4)" in html


def test_a_trial_over_its_budget_is_drawn_at_the_rate_it_reached():
    study = make_study(plan=PLAN[:4], remeasure=False)
    over = 2 * RAM_BUDGET
    study.add_trial(
        optuna.trial.create_trial(
            state=optuna.trial.TrialState.COMPLETE,
            value=0.0,
            params={},
            distributions={},
            intermediate_values={10: 700.0, 20: 900.0},
            user_attrs={
                "knobs": Knobs(batch_size=8, shuffle_buffer=9000).to_dict(),
                "status": "ram-budget",
                "peak_rss_bytes": over,
            },
            constraints={"ram_bytes_over_budget": float(over - RAM_BUDGET)},
        )
    )
    snapshot = snapshot_study(study, "memory")
    row = snapshot.trials[4]
    assert (row.examples_per_sec, row.reached_examples_per_sec, row.over_budget) == (
        None,
        900.0,
        True,
    )
    point = sc.history(snapshot).points[-1]
    assert (point.number, point.kind, point.examples_per_sec) == (4, "over budget", 900.0)
    assert point.hover.startswith("trial 4 · 900 examples/s (over budget: the rate it reached")
    ram = sc.ram_tradeoff(snapshot)
    assert [p.number for p in ram.points] == [0, 1, 2, 3, 4]  # every trial the table shows
    assert ram.peak_rss_mib[-1] == over / MIB
    assert 4 not in ram.front_numbers
    for figure in (sc.history_figure(sc.history(snapshot)), sc.ram_figure(ram)):
        traces = [t for t in figure.data if t.name == "trial (over budget)"]
        assert len(traces) == 1 and traces[0].marker.symbol == "x"
    assert '900 <span class="muted">(over budget, one run)</span>' in render_study_html(snapshot)


def test_a_hazard_the_recommendation_brings_is_a_warning_beside_its_changes():
    from tfperf.results.findings import Evidence, Finding, Level

    hazard = Finding(
        "worker-shards", Level.NOTE, "Each of the 4 workers ends a pass short.",
        "Fewer workers make fewer.", Evidence("end_to_end", 2), hazard=True,
    )  # fmt: skip
    plain = Finding("restarts", Level.NOTE, "A pass restarts.", None, Evidence("end_to_end", 2))
    result = fake_profile()
    result.findings = [plain, hazard]
    summary = ss.summary(snapshot_study(make_study(best_result=result), "memory"))
    assert summary is not None
    assert summary.warnings[-1] == hazard.sentence and plain.sentence not in summary.warnings
    # The same trial's findings, read by the tuner for the terminal summary, say the same.
    from tfperf.results.tune import Measurement
    from tfperf.tuner._result import _hazards

    study = make_study(best_result=result)
    best = Measurement("trial 2", 2, PLAN[2].knobs.to_dict(), [2000.0], 0, None)
    baseline = Measurement("baseline", 0, PLAN[0].knobs.to_dict(), [1000.0], 0, None)
    assert _hazards(study, best, baseline) == [hazard.sentence]
    assert _hazards(study, baseline, baseline) == []  # keeping the baseline brings none
