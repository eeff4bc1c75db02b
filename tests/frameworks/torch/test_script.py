"""Zero-change mode for a PyTorch script: its DataLoader calls found, clocked and patched."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import runpy
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from tfperf.errors import KnobError
from tfperf.frameworks.torch._script import (
    ScriptMode,
    ScriptRun,
    profile_script_pipeline,
    run_script,
)
from tfperf.frameworks.torch._sites import TorchSites
from tfperf.results.discovery import ArgumentForm

torch = pytest.importorskip("torch")

TRAIN = """\
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset):
    def __len__(self):
        return 32

    def __getitem__(self, index):
        time.sleep(0.001)  # a read
        return torch.full((4,), float(index)), index % 2


def main():
    loader = DataLoader(Slow(), batch_size=8, num_workers=0)
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(int(sys.argv[1])):
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    print("workers", loader.num_workers, "pin_memory", loader.pin_memory, "threads",
          torch.get_num_threads())


if __name__ == "__main__":
    main()
"""
LINE = 18  # the DataLoader(...) call in TRAIN
WORKERS = f"DataLoader@train.py:{LINE}.num_workers"
PIN = f"DataLoader@train.py:{LINE}.pin_memory"


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    return path


def test_discovery_names_each_argument_as_written(script: Path) -> None:
    sites = TorchSites().find(_Loaded(script, ("3",)))
    by_name = {site.name: site for site in sites.sites}
    assert sites.end == f"train.py:{LINE}"
    assert by_name[WORKERS].value == 0 and by_name[WORKERS].form is ArgumentForm.KEYWORD
    batch = by_name[f"DataLoader@train.py:{LINE}.batch_size"]
    assert (batch.value, batch.form) == (8, ArgumentForm.KEYWORD)
    assert by_name[PIN].form is ArgumentForm.ABSENT and by_name[PIN].value is None


def test_the_loop_is_clocked_with_workers_overridden_and_stops_after_its_steps(
    script: Path,
) -> None:
    run = run_script(
        script, ["50"], {WORKERS: 2}, steps=3, warmup=1, mode=ScriptMode.END_TO_END, threads=1
    )
    assert run.completed and run.steps == 3 and len(run.computes_s) == 3
    assert run.options["num_workers"] == 2 and run.loader == f"train.py:{LINE}"
    assert run.first_batch_s is not None and run.first_batch_s > 0
    assert 0 < run.wait_fraction < 1 and run.examples_per_sec is not None
    assert ScriptRun.from_dict(run.to_dict()) == run
    assert sys.argv[0] != str(script)  # restored


def test_compute_only_serves_one_batch_and_loader_only_needs_no_loop(script: Path) -> None:
    # 50 epochs of 4 batches: only the measured steps run, across epochs.
    computed = run_script(script, ["50"], {}, steps=6, warmup=0, mode=ScriptMode.COMPUTE_ONLY)
    assert computed.completed and computed.steps == 6
    alone = run_script(script, ["1"], {}, steps=6, warmup=1, mode=ScriptMode.LOADER_ONLY)
    assert alone.completed and alone.steps == 6  # past the script's one epoch of 4 batches
    short = run_script(script, ["1"], {}, steps=10, warmup=0, mode=ScriptMode.END_TO_END)
    assert not short.completed and short.steps == 4  # the script ended first


@pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true")
def test_the_patch_applies_with_patch_p0_and_the_patched_script_runs_so(script: Path) -> None:
    if shutil.which("patch") is None:
        pytest.skip("needs the `patch` tool")
    discovery = TorchSites().find(_Loaded(script, ("1",)))
    after = {"sites": {WORKERS: 2, PIN: 1}, "torch_threads": 1}
    patch = TorchSites().patch(script.parent, discovery, {}, after, script=True)
    assert [change.site.name for change in patch.written] == [WORKERS, PIN]
    assert patch.describe()[1] == f"  {PIN}: not set -> True"
    (script.parent / "train.py.patch").write_text(patch.diff)
    subprocess.run(
        ["patch", "-p0", "-i", "train.py.patch"], cwd=script.parent, check=True, capture_output=True
    )
    text = script.read_text()
    assert "num_workers=2, pin_memory=True)" in text
    assert "import torch\ntorch.set_num_threads(1)\n" not in text  # the file's own import
    assert "torch.set_num_threads(1)" in text
    printed = io.StringIO()
    saved = sys.argv
    sys.argv = [str(script), "1"]
    try:
        with contextlib.redirect_stdout(printed):
            runpy.run_path(str(script), run_name="__main__")
    finally:
        sys.argv = saved
        torch.set_num_threads(_THREADS)
    assert "workers 2 pin_memory True threads 1" in printed.getvalue()


def test_a_patch_writes_no_argument_that_needs_workers_where_the_loader_has_none(
    script: Path,
) -> None:
    # A trial with no workers ran with prefetch_factor and persistent_workers dropped (torch
    # refuses them without workers), so its patch writes neither; with workers, both.
    discovery = TorchSites().find(_Loaded(script, ("1",)))
    factor = f"DataLoader@train.py:{LINE}.prefetch_factor"
    kept = f"DataLoader@train.py:{LINE}.persistent_workers"
    chosen = {factor: 4, kept: 1, f"DataLoader@train.py:{LINE}.batch_size": 16}
    for workers, written in ((0, ["batch_size"]), (2, ["num_workers", "batch_size"])):
        after = {"sites": {**chosen, WORKERS: workers}}
        patch = TorchSites().patch(script.parent, discovery, {}, after, script=True)
        names = [change.site.name.rsplit(".", 1)[1] for change in patch.written]
        if workers:
            written += ["persistent_workers", "prefetch_factor"]
        assert sorted(names) == sorted(written)


def test_a_script_fixes_the_loader_knobs_and_places_the_threads(script: Path) -> None:
    discovery = TorchSites().find(_Loaded(script, ("1",)))
    problems = TorchSites().unplaceable(script.parent, discovery)
    assert "num_workers" in problems and "DataLoader@FILE:LINE sites" in problems["num_workers"]
    assert "torch_threads" not in problems  # after the file's imports
    (script.parent / "bare.py").write_text("x = 1\nimport torch\n")
    moved = dataclasses.replace(discovery, end="bare.py:1")
    assert (
        "no imports at its top" in TorchSites().unplaceable(script.parent, moved)["torch_threads"]
    )


def test_loaders_made_in_a_library_are_measured_and_named_not_tunable(tmp_path: Path) -> None:
    library = tmp_path / ".venv" / "lib" / "site-packages"
    library.mkdir(parents=True)
    (library / "trainer_lib.py").write_text(
        "from torch.utils.data import DataLoader\n\n\n"
        "def fit(data):\n"
        "    for _ in DataLoader(data, batch_size=2):\n"
        "        pass\n"
    )
    (tmp_path / "train.py").write_text(
        textwrap.dedent(f"""\
            import sys
            sys.path.insert(0, {str(library)!r})
            import torch
            import trainer_lib
            trainer_lib.fit(torch.zeros(4, 1))
        """)
    )
    run = run_script(tmp_path / "train.py", [], {}, steps=2, warmup=0, mode=ScriptMode.END_TO_END)
    assert run.completed and run.steps == 2 and run.loader == "train.py:5"  # the user's line
    [made] = run.discovery.untunable
    assert (made.where, made.reached_from) == ("trainer_lib.py:5", "train.py:5")
    assert "(a library)" in made.reason and not run.discovery.sites


_EVALUATES_FIRST = """\
import torch
from torch.utils.data import DataLoader

train = DataLoader(torch.zeros(32, 2), batch_size=4)
val = DataLoader(torch.zeros(8, 2), batch_size=8)
with torch.no_grad():
    for _ in val:
        pass
for _ in train:
    pass
"""


def test_an_evaluation_pass_before_training_is_not_the_loader_measured(tmp_path: Path) -> None:
    # The validation loader, iterated first under no_grad, once stood in for training's.
    (tmp_path / "train.py").write_text(_EVALUATES_FIRST)
    run = run_script(tmp_path / "train.py", [], {}, steps=2, warmup=0, mode=ScriptMode.END_TO_END)
    assert run.loader == "train.py:4" and run.options["batch_size"] == 4
    # A script that only evaluates measures its loader as ever.
    only = _EVALUATES_FIRST.split("for _ in train:")[0].replace("train = DataLoader", "# ")
    (tmp_path / "infer.py").write_text(only)
    run = run_script(tmp_path / "infer.py", [], {}, steps=1, warmup=0, mode=ScriptMode.END_TO_END)
    assert run.loader == "infer.py:5" and run.options["batch_size"] == 8


def test_an_override_that_matches_no_call_lists_the_sites(script: Path) -> None:
    with pytest.raises(KnobError, match=f"Sites found: .*{WORKERS}"):
        run_script(
            script,
            ["1"],
            {"DataLoader@train.py:99.num_workers": 2},
            steps=0,
            mode=ScriptMode.DISCOVER,
        )


def test_dataloader_site_values_are_checked_by_what_the_argument_controls() -> None:
    from tfperf.knobs import check_site_value

    assert check_site_value(WORKERS, 0) == 0 and check_site_value(WORKERS, None) is None
    assert check_site_value(PIN, True) == 1 and check_site_value(PIN, 0) == 0
    factor = f"DataLoader@train.py:{LINE}.prefetch_factor"
    assert check_site_value(factor, None) is None and check_site_value(factor, 4) == 4
    for name, bad in ((WORKERS, -1), (PIN, 2), (factor, 0)):
        with pytest.raises(KnobError, match="must be"):
            check_site_value(name, bad)


def test_workers_are_shut_down_through_the_iterator_torch_has() -> None:
    """`_script._shut_down` calls this private method: pinned against the installed torch."""
    from torch.utils.data import dataloader

    assert callable(dataloader._MultiProcessingDataLoaderIter._shutdown_workers)


_THREADS = torch.get_num_threads()


class _Loaded:
    """What `TorchSites.find` reads of a loaded script."""

    def __init__(self, path: Path, argv: tuple[str, ...]) -> None:
        self.path = path
        self.argv = argv


def test_the_core_profiler_measures_all_three_phases_in_one_run_of_the_script(
    script: Path,
) -> None:
    from tfperf.measure import EpochInfo
    from tfperf.pipeline import PipelineKind, load_pipeline
    from tfperf.results import Phase

    pipeline = load_pipeline(script, ["1"])  # one epoch of 4 batches
    assert pipeline.kind is PipelineKind.SCRIPT
    pipeline = pipeline.with_discovery(TorchSites().find(pipeline))
    knobs = pipeline.baseline.replace(sites={**pipeline.baseline.sites, WORKERS: 2})
    seen: list[object] = []
    result, found = profile_script_pipeline(
        pipeline,
        knobs,
        steps=6,
        warmup=1,
        probes=[],
        on_discovery=seen.append,
        epoch_for=lambda loader, anew: EpochInfo(steps=len(loader)),
    )
    assert found.completed and seen == [found.discovery]
    assert found.options["num_workers"] == 2 and found.discovery.end == f"train.py:{LINE}"
    assert result.knobs["sites"][WORKERS] == 2
    assert [phase.phase for phase in result.phases()] == [
        Phase.END_TO_END,
        Phase.PIPELINE_ONLY,
        Phase.COMPUTE_ONLY,
    ]
    assert all(phase.steps == 6 for phase in result.phases())
    assert result.end_to_end.epochs_crossed >= 1  # the script's one epoch was not the end
    assert found.memory is not None and found.memory.most_workers == 2


@pytest.mark.parametrize(
    ("asked", "phases"),
    [
        ({"end_to_end_only": True}, ["end_to_end"]),
        ({"compute_known": True}, ["end_to_end", "pipeline_only"]),
    ],
)
def test_a_script_measures_only_the_phases_its_request_asks_for(
    script: Path, asked: dict[str, bool], phases: list[str]
) -> None:
    """A script honours the request's phases as a pipeline file does: the tuner's
    re-measurement runs read the end-to-end phase alone, and a trial that trains as an earlier
    one leaves the model alone out."""
    from tfperf import frameworks
    from tfperf.frameworks import ProfileRequest
    from tfperf.pipeline import load_pipeline

    pipeline = load_pipeline(script, ["1"])
    request = ProfileRequest(steps=4, warmup=1, probes=[], **asked)
    result = frameworks.get("torch").profile(pipeline, None, request)
    assert [phase.phase.value for phase in result.phases()] == phases
    assert result.end_to_end.steps == 4


def test_a_persistent_loader_is_measured_across_the_script_epochs(script: Path) -> None:
    # A persistent loader hands back the same iterator each epoch; the profiler must still
    # see a new pass, not a one-shot iterator that ran out.
    from tfperf.measure import EpochInfo
    from tfperf.pipeline import load_pipeline

    pipeline = load_pipeline(script, ["1"])  # one epoch of 4 batches
    pipeline = pipeline.with_discovery(TorchSites().find(pipeline))
    persistent = f"DataLoader@train.py:{LINE}.persistent_workers"
    knobs = pipeline.baseline.replace(
        sites={**pipeline.baseline.sites, WORKERS: 1, persistent: True}
    )
    result, found = profile_script_pipeline(
        pipeline,
        knobs,
        steps=6,
        warmup=1,
        probes=[],
        epoch_for=lambda loader, anew: EpochInfo(steps=len(loader)),
    )
    assert found.completed and found.options["persistent_workers"] is True
    assert result.end_to_end.steps == 6 and result.end_to_end.epochs_crossed >= 1


def test_each_pass_s_worker_start_in_iter_loader_is_clocked_as_its_first_wait(
    script: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # torch starts a pass's workers in `iter(loader)`, before any `next()`: a clock started
    # at `next()` would leave every epoch's start-up out of the script's run.
    from torch.utils.data import DataLoader

    now = [0.0]
    original = DataLoader.__iter__

    def starting(self: object) -> object:
        now[0] += 5.0  # the workers starting, on a fake clock
        return original(self)  # type: ignore[arg-type]

    monkeypatch.setattr(DataLoader, "__iter__", starting)
    run = run_script(
        script, ["2"], {}, steps=6, warmup=0, mode=ScriptMode.END_TO_END, clock=lambda: now[0]
    )
    assert run.waits_s == (5.0, 0.0, 0.0, 0.0, 5.0, 0.0)  # two epochs of 4 batches
    assert run.first_batch_s == 5.0


#: A sharded stream of 40 items under 2 kept workers, batches of 8: each worker yields 20
#: items, two batches of 8 and one of 4, so a pass ends in 2 short batches.
KEPT_STREAM = """\
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info


class Lines(IterableDataset):
    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return ((torch.full((2,), float(i)), i % 2) for i in range(start, 40, step))


loader = DataLoader(Lines(), batch_size=8, num_workers=2, persistent_workers=True)
net = torch.nn.Linear(2, 2)
for epoch in range(100):
    for x, y in loader:
        net(x).sum().backward()
"""


def test_a_script_s_kept_workers_are_let_go_so_its_pass_is_checked(tmp_path: Path) -> None:
    """The script's persistent iterator is shut down after its phases: the loader lets it go,
    so the checked pass starts workers anew and the stream's short batches are told."""
    from tfperf import frameworks
    from tfperf.frameworks import ProfileRequest
    from tfperf.pipeline import load_pipeline

    path = tmp_path / "train.py"
    path.write_text(KEPT_STREAM)
    pipeline = load_pipeline(path, [])
    result = frameworks.get("torch").profile(pipeline, None, ProfileRequest(steps=12, warmup=1))
    loader = result.loader
    assert loader is not None and loader.workers == 2 and loader.persistent_workers
    assert loader.pass_check is not None and loader.pass_check.examples == 40
    shards = next(f for f in result.findings if f.rule == "worker-shards")
    assert "a pass ends in 2 short batches (4 examples) of 6" in shards.text and shards.hazard


#: 64 items in batches of 4 (16 a pass), but each epoch of the loop breaks after 3 steps: the
#: loader starts again after 4 batches (the fourth is taken, then the loop breaks).
BREAKS = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

loader = DataLoader(TensorDataset(torch.randn(64, 2)), batch_size=4)
net = torch.nn.Linear(2, 2)
for epoch in range(100):
    for step, (x,) in enumerate(loader):
        if step == 3:
            break
        net(x).sum().backward()
"""


def test_a_loop_that_breaks_early_is_measured_over_its_own_epochs(tmp_path: Path) -> None:
    """A loop that breaks after N steps starts the loader again each epoch: the profiler's
    passes end there too, and the profile's epoch is the loop's, not the loader's length."""
    from tfperf import frameworks
    from tfperf.frameworks import ProfileRequest
    from tfperf.pipeline import load_pipeline
    from tfperf.results.stages import EpochSource

    path = tmp_path / "train.py"
    path.write_text(BREAKS)
    result = frameworks.get("torch").profile(
        load_pipeline(path, []), None, ProfileRequest(steps=16, warmup=1, probes=[])
    )
    passes = {}
    for record in result.end_to_end.records:
        passes[record.epoch] = passes.get(record.epoch, 0) + 1
    assert max(passes.values()) == 4 and len(passes) >= 4
    assert result.restarts is not None and result.restarts.epoch_steps == 4
    assert result.restarts.epoch_source is EpochSource.LOOP


def test_a_loop_that_takes_one_batch_per_new_iterator_is_told_to_keep_one(
    tmp_path: Path,
) -> None:
    """`next(iter(loader))` each step: every step starts a new pass of the loader, so no
    step ever waits between restarts, and the fix is one iterator kept across steps."""
    from tfperf import frameworks
    from tfperf.frameworks import ProfileRequest
    from tfperf.pipeline import load_pipeline
    from tfperf.results.stages import EpochSource

    path = tmp_path / "train.py"
    path.write_text(
        BREAKS.replace(
            "for epoch in range(100):\n    for step, (x,) in enumerate(loader):\n"
            "        if step == 3:\n            break\n",
            "for step in range(2000):\n    (x,) = next(iter(loader))\n",
        ).replace("        net(x)", "    net(x)")
    )
    result = frameworks.get("torch").profile(
        load_pipeline(path, []), None, ProfileRequest(steps=12, warmup=1, probes=[])
    )
    cost = result.restarts
    assert cost is not None and cost.epoch_steps == 1 and cost.steady_steps == 0
    assert cost.epoch_source is EpochSource.LOOP
    told = next(f for f in result.findings if f.rule == "restarts")
    assert told.text.startswith(
        "Every measured step started a new pass: the script's loop starts a new pass of the "
        "DataLoader for every batch it takes"
    )
    assert told.fix is not None and told.fix.startswith(
        "Make the iterator once, before the loop (`it = iter(loader)`)"
    )


#: BREAKS with training's own outputs: a log and the arguments written as the script starts,
#: which every run of it does, then a checkpoint after each epoch and a best model made new.
#: Its epoch ends itself (the break), so the profile's runs reach the code after it too.
SAVES = (
    BREAKS.replace(
        "loader = ",
        'import json\n\nlog = open("train.log", "w")\nwith open("args.json", "w") as args:\n'
        '    json.dump({"epochs": 100}, args)\nloader = ',
        1,
    )
    + '    torch.save(net.state_dict(), "model.pt")\n'
    + '    torch.save(net.state_dict(), "best.pt")\n'
    + '    log.write(f"epoch {epoch}\\n")\n'
)


def test_the_user_s_files_a_script_writes_as_tfperf_runs_it_are_put_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tfperf import frameworks
    from tfperf.frameworks import ProfileRequest
    from tfperf.pipeline import load_pipeline
    from tfperf.report import render_answer

    monkeypatch.chdir(tmp_path)
    (tmp_path / "temporary").mkdir()  # not the folder of the files, which it would not name
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "temporary"))
    (tmp_path / "train.py").write_text(SAVES)
    torch.save({"trained": torch.ones(3)}, tmp_path / "model.pt")
    trained = (tmp_path / "model.pt").read_bytes()
    for name in ("train.log", "args.json"):
        (tmp_path / name).write_text(f"the real run's {name}\n")
    result = frameworks.get("torch").profile(
        load_pipeline(tmp_path / "train.py", []), None, ProfileRequest(steps=12, warmup=1)
    )
    assert result.restarts is not None and result.restarts.epoch_steps == 4  # epochs ended
    assert (tmp_path / "model.pt").read_bytes() == trained
    for name in ("train.log", "args.json"):
        assert (tmp_path / name).read_text() == f"the real run's {name}\n"
    here = str(tmp_path.resolve())
    assert result.files_put_back == [f"{here}/{n}" for n in ("train.log", "args.json", "model.pt")]
    assert result.files_created == [f"{here}/best.pt"]
    assert (
        "Your files: train.py changed train.log, args.json and model.pt while tfperf ran it; "
        "tfperf put them back as they were. It also created best.pt, written by a run tfperf "
        "cut short."
    ) in render_answer(result)


#: A DataLoader built anew for each epoch, its one worker's PID in every batch the loop takes.
EACH_EPOCH = """\
import os

import torch
from torch.utils.data import DataLoader, Dataset


class Pids(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, index):
        return torch.tensor([float(os.getpid())])


for epoch in range(100):
    loader = DataLoader(Pids(), batch_size=4, num_workers=1)
    for pids in loader:
        with open("pids.txt", "a") as seen:
            seen.write(f"{int(pids[0, 0])}\\n")
"""


def test_a_loader_built_for_each_pass_keeps_no_workers_whatever_it_is_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tfperf serves the loop the first loader's passes; the script would build a new one for
    each, so each pass starts new workers, persistent_workers=True or not, and the fix, where
    the restarts' cost is told, says to build it once."""
    from tfperf import frameworks
    from tfperf.frameworks import ProfileRequest
    from tfperf.pipeline import load_pipeline

    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(EACH_EPOCH)
    pipeline = load_pipeline(tmp_path / "train.py", [])
    pipeline = pipeline.with_discovery(TorchSites().find(pipeline))
    persistent = "DataLoader@train.py:16.persistent_workers"
    knobs = pipeline.baseline.replace(sites={**pipeline.baseline.sites, persistent: True})
    result = frameworks.get("torch").profile(
        pipeline, knobs, ProfileRequest(steps=12, warmup=1, probes=[])
    )
    assert result.knobs[persistent]  # as the script ran it
    assert result.loader is not None and result.loader.built_anew == "train.py:15"
    pids = (tmp_path / "pids.txt").read_text().split()
    assert len(set(pids)) >= 3  # a pass's worker never served the next pass
    restarts = next(f for f in result.findings if f.rule == "restarts")
    assert result.restarts is not None and restarts.fix is not None
    if result.restarts.cost_told:
        assert restarts.fix.startswith("The loop at train.py:15 builds a new DataLoader")
    else:  # worker starts on a busy machine spread too wide to state a cost: no fix is told
        assert "cannot tell what a restart costs" in restarts.text
