"""Real PyTorch training scripts, profiled and tuned as written (issue 54's shapes).

Each test writes its own small script (a real `DataLoader` over a few hundred items, a tiny
`nn.Linear`, CPU) and runs `tfperf profile` (in this process, `--debug`, a window of a few
steps) or `tfperf tune --write-patch` on it. The tuner's trials are faked (`FakeRunner`: the
speed of each configuration set by its knobs, so a winner exists without timing anything);
everything else is real: detection, loading, the script's own run up to its loop, the call
sites it finds and the patch, applied with `patch -p0`, and the patched script run again.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.trials import FakeRunner
from tfperf import frameworks
from tfperf.knobs import Knobs
from tfperf.pipeline import PipelineKind, load_pipeline

pytest.importorskip("torch")

SMALL = ("--steps", "6", "--warmup", "1", "--min-seconds", "0", "--no-stages")
TUNE = ("--trials", "3", "--rounds", "1", "--finalists", "1", "--seed", "3", "--quiet")

#: The model and loop every script here shares: a tiny classifier, one optimizer step a batch.
MODEL = """\
net = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(net.parameters(), lr=0.1)


def step(x, y):
    loss = torch.nn.functional.cross_entropy(net(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

PACKAGE_DATA = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


def make(batch_size):
    data = TensorDataset(torch.randn(256, 8), torch.randint(0, 2, (256,)))
    return DataLoader(data, batch_size=batch_size, shuffle=True, num_workers=0)
"""
PACKAGE_LINE = 7  # the DataLoader(...) call in PACKAGE_DATA
PACKAGE_TRAIN = """\
import argparse

from mypkg import model
from mypkg.data import make


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    args = parser.parse_args()
    loader = make(16)
    for epoch in range(args.epochs):
        for x, y in loader:
            model.step(x, y)
    print("workers", loader.num_workers)


if __name__ == "__main__":
    main()
"""


def _package(folder: Path) -> Path:
    (folder / "mypkg").mkdir()
    (folder / "mypkg" / "__init__.py").write_text("")
    (folder / "mypkg" / "data.py").write_text(PACKAGE_DATA)
    (folder / "mypkg" / "model.py").write_text("import torch\n\n" + MODEL)
    (folder / "train.py").write_text(PACKAGE_TRAIN)
    return folder / "train.py"


def test_a_loader_built_in_the_users_package_is_torchs_measured_and_patched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _package(tmp_path)
    workers = f"DataLoader@mypkg/data.py:{PACKAGE_LINE}.num_workers"
    assert "DataLoader(" not in script.read_text() and "torch" not in script.read_text()
    assert frameworks.detect(script).name == "torch"

    saved = _profile(tmp_path, monkeypatch, capsys, "--", "--epochs", "1")
    assert (
        Knobs.from_mapping(saved["knobs"]).sites[workers] == 0
    )  # a call site in the package, under the root
    best, printed = _patched_runs(tmp_path, monkeypatch, capsys, workers, ["--epochs", "1"])
    assert best > 0 and f"workers {best}\n" == printed


def test_detection_reads_the_users_modules_and_leaves_tensorflow_scripts_alone(
    tmp_path: Path,
) -> None:
    def detected(files: dict[str, str]) -> str:
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        for name, text in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text)
        return frameworks.detect(folder / "train.py").name

    torch_only, tf_only = "import torch\n", "import tensorflow as tf\n"
    assert detected({"train.py": "import helpers\n", "helpers.py": torch_only}) == "torch"
    relative = {"pkg/__init__.py": "from . import data\n", "pkg/data.py": PACKAGE_DATA}
    assert detected({"train.py": "import pkg\n", **relative}) == "torch"
    # A TensorFlow script with a torch helper, both frameworks among the modules, tf.data
    # beside torch in one file, and no framework at all: TensorFlow's, as before.
    assert detected({"train.py": f"{tf_only}import helpers\n", "helpers.py": torch_only}) == (
        "tensorflow"
    )
    both = {"a.py": torch_only, "b.py": tf_only}
    assert detected({"train.py": "import a\nimport b\n", **both}) == "tensorflow"
    assert detected({"train.py": torch_only + tf_only}) == "tensorflow"
    assert detected({"train.py": "import os\n"}) == "tensorflow"


MODULE_LEVEL = f"""\
import argparse
from pathlib import Path

import torch
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=1)
args = parser.parse_args()

data = TensorDataset(torch.randn(256, 8), torch.randint(0, 2, (256,)))
loader = DataLoader(data, batch_size=16, shuffle=True, num_workers=0)
{MODEL}
for epoch in range(args.epochs):
    for x, y in loader:
        step(x, y)
Path("trained").write_text(str(loader.num_workers))
"""


def test_a_module_level_loop_is_run_as_a_script_and_stopped_never_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/zero-change.md's own PyTorch example has this shape: no `__main__`, no function."""
    script = tmp_path / "train.py"
    script.write_text(MODULE_LEVEL)
    monkeypatch.chdir(tmp_path)

    pipeline = load_pipeline(script, ["--epochs", "1"])
    assert pipeline.kind is PipelineKind.SCRIPT and pipeline.framework == "torch"
    assert not (tmp_path / "trained").exists()  # loading ran nothing of it

    _profile(tmp_path, monkeypatch, capsys, "--", "--epochs", "50")
    assert not (tmp_path / "trained").exists()  # stopped after its steps: 50 epochs not run
    best, _ = _patched_runs(tmp_path, monkeypatch, capsys, "DataLoader@train.py:12.num_workers", [])
    assert best > 0 and (tmp_path / "trained").read_text() == str(best)


def test_a_loop_shorter_than_the_phases_is_refused_with_its_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two epochs that break after 8 batches cannot hold the phases: the figures would rest
    on part of one."""
    from tfperf.cli.main import EXIT_USAGE, main

    breaks = MODULE_LEVEL.replace(
        "    for x, y in loader:\n        step(x, y)\n",
        "    for i, (x, y) in enumerate(loader):\n        step(x, y)\n        if i == 7:\n"
        "            break\n",
    )
    assert breaks != MODULE_LEVEL
    (tmp_path / "train.py").write_text(breaks)
    monkeypatch.chdir(tmp_path)
    status = main(["profile", "train.py", "--steps", "30", "--no-stages", "--", "--epochs", "2"])
    err = capsys.readouterr().err
    assert status == EXIT_USAGE, err
    assert "train.py's training loop took 16 batches in all and then ended, before tfperf" in err
    # The CLI's window lasts at least 1 s too, which may be what the loop ran out of.
    assert "each phase takes at least 30 steps and 1 s" in err
    assert "a shorter least time (--min-seconds)" in err
    assert (tmp_path / "trained").exists()  # as the message says: the code after it ran
    # The end-to-end window (9 steps) fits in the 16 batches, its replay (9 more) does not.
    argv = ["--steps", "8", "--warmup", "1", "--min-seconds", "0", "--no-stages"]
    status = main(["profile", "train.py", *argv, "--", "--epochs", "2"])
    err = capsys.readouterr().err
    assert status == EXIT_USAGE, err
    assert (
        "took 16 batches in all and then ended, while tfperf timed its step on its batches "
        "again (7 of them, after the end-to-end window); each phase takes at least 8 steps"
    ) in err


def test_a_loop_over_two_loaders_in_step_is_stopped_and_a_validation_pass_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """zip(a, b): one loader is served, and the other's batches would be timed as the
    model's. A second loader read once a pass (validation) leaves the profile as it is."""
    from tfperf.cli.main import EXIT_USAGE, main

    second = "other = DataLoader(data, batch_size=16)\n"
    zipped = MODULE_LEVEL.replace(
        "    for x, y in loader:\n", "    for (x, y), _ in zip(loader, other):\n"
    )
    assert "zip(loader, other)" in zipped
    (tmp_path / "train.py").write_text(zipped.replace("for epoch", second + "for epoch"))
    monkeypatch.chdir(tmp_path)
    status = main(["profile", "train.py", *SMALL, "--", "--epochs", "50"])
    err = capsys.readouterr().err
    assert status == EXIT_USAGE, err
    assert "train.py's training loop reads two DataLoaders in step, as `zip(a, b)` does" in err
    assert not (tmp_path / "trained").exists()

    validates = MODULE_LEVEL.replace(
        "        step(x, y)\n", "        step(x, y)\n    for x, y in other:\n        net(x)\n"
    )
    (tmp_path / "train.py").write_text(validates.replace("for epoch", second + "for epoch"))
    _profile(tmp_path, monkeypatch, capsys, "--", "--epochs", "50")


LIBRARY = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


class Prefetcher:
    \"\"\"Hands out a loader's batches from the library's own iterator.\"\"\"

    def __init__(self, loader):
        self.loader = loader

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        batches = iter(self.loader)
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                return
            yield batch


def create_loader(size, batch_size, num_workers=0, pin_memory=False):
    data = TensorDataset(torch.randn(size, 8), torch.randint(0, 2, (size,)))
    loader = DataLoader(
        data, batch_size=batch_size, num_workers=num_workers, pin_memory=pin_memory, shuffle=True
    )
    return Prefetcher(loader)
"""
LIBRARY_TRAIN = f"""\
import argparse

import torch
import fastlib

{MODEL}

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("-j", "--workers", type=int, default=0)
    parser.add_argument("--pin-mem", action="store_true", default=False)
    parser.add_argument("-b", "--batch-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=1)
    args = parser.parse_args()
    loader = fastlib.create_loader(
        256, args.batch_size, num_workers=args.workers, pin_memory=args.pin_mem
    )
    for epoch in range(args.epochs):
        for x, y in loader:
            step(x, y)
    print("workers", loader.loader.num_workers)


if __name__ == "__main__":
    main()
"""


def _line(text: str, needle: str) -> int:
    """The line of `text` holding `needle`, counted from 1."""
    [line] = [n for n, row in enumerate(text.splitlines(), 1) if needle in row]
    return line


LIBRARY_LINE = _line(LIBRARY, "loader = DataLoader(")
#: The `add_argument` lines of LIBRARY_TRAIN whose defaults reach the library's DataLoader.
WORKERS_LINE = _line(LIBRARY_TRAIN, '"--workers"')
PIN_LINE = _line(LIBRARY_TRAIN, '"--pin-mem"')
BATCH_LINE = _line(LIBRARY_TRAIN, '"--batch-size"')
REACHED_LINE = _line(LIBRARY_TRAIN, "fastlib.create_loader(")


def test_a_library_s_loader_is_measured_and_tuned_through_the_scripts_option_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A library outside the script's folder makes the DataLoader and iterates it in its own
    `Prefetcher`: measured all the same, its call named not tunable, and its arguments traced
    to the `-j`, `--pin-mem` and `-b` defaults that reached it, which the patch changes."""
    from tfperf.frameworks.torch._script import profile_script_pipeline
    from tfperf.frameworks.torch._sites import TorchSites

    library = tmp_path / "lib" / "site-packages"
    (library / "fastlib").mkdir(parents=True)
    (library / "fastlib" / "__init__.py").write_text(LIBRARY)
    monkeypatch.syspath_prepend(str(library))
    monkeypatch.setenv("PYTHONPATH", str(library))  # for the child processes tfperf starts
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "train.py").write_text(LIBRARY_TRAIN)
    assert frameworks.detect(folder / "train.py").name == "torch"

    pipeline = load_pipeline(folder / "train.py")
    found = TorchSites().find(pipeline)
    workers = f"DataLoader@train.py:{WORKERS_LINE}.num_workers"
    assert found.values() == {
        workers: 0,
        f"DataLoader@train.py:{PIN_LINE}.pin_memory": 0,
        f"DataLoader@train.py:{BATCH_LINE}.batch_size": 16,
    }
    assert found.end == f"train.py:{REACHED_LINE}"
    [made] = found.untunable
    assert (made.where, made.reached_from) == (
        f"fastlib/__init__.py:{LIBRARY_LINE}",
        f"train.py:{REACHED_LINE}",
    )
    assert "made inside fastlib/ (a library)" in made.reason
    assert f"num_workers from train.py:{WORKERS_LINE}" in made.reason

    # Knobs apply where the library makes its loader, measured as the library iterates it.
    pipeline = pipeline.with_discovery(found)
    knobs = pipeline.baseline.replace(sites={**pipeline.baseline.sites, workers: 1})
    result, profiled = profile_script_pipeline(pipeline, knobs, steps=6, warmup=1, probes=[])
    assert profiled.options["num_workers"] == 1 and profiled.completed
    assert result.end_to_end.steps == 6 and result.end_to_end.examples_per_sec > 0

    # A value given on the command line is not the default: nothing to patch there.
    given = TorchSites().find(load_pipeline(folder / "train.py", ["-j", "1"]))
    assert workers not in given.values() and "num_workers from" not in given.untunable[0].reason

    best, printed = _patched_runs(folder, monkeypatch, capsys, workers, [])
    assert best > 0 and printed == f"workers {best}\n"
    written = (folder / "train.py").read_text().splitlines()[WORKERS_LINE - 1]
    assert written == f'    parser.add_argument("-j", "--workers", type=int, default={best})'


OWN_OPTIONS = f"""\
import argparse

import torch
from torch.utils.data import DataLoader, TensorDataset

{MODEL}

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("-j", "--workers", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    data = TensorDataset(torch.randn(256, 8), torch.randint(0, 2, (256,)))
    loader = DataLoader(data, batch_size=args.batch_size, num_workers=args.workers)
    for x, y in loader:
        step(x, y)
    print("workers", loader.num_workers)


if __name__ == "__main__":
    main()
"""


def test_an_own_loader_s_values_from_option_defaults_are_tuned_at_the_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`DataLoader(data, num_workers=args.workers)`: the value is the `-j` default's, so it
    is tuned and patched there, not left as an edit by hand at the call."""
    from tfperf.frameworks.torch._sites import TorchSites

    (tmp_path / "train.py").write_text(OWN_OPTIONS)
    call = _line(OWN_OPTIONS, "loader = DataLoader(")
    workers_line, batch_line = _line(OWN_OPTIONS, "--workers"), _line(OWN_OPTIONS, "--batch-")
    workers = f"DataLoader@train.py:{workers_line}.num_workers"
    batch = f"DataLoader@train.py:{batch_line}.batch_size"
    found = TorchSites().find(load_pipeline(tmp_path / "train.py"))
    assert found.end == f"train.py:{call}" and not found.untunable
    assert found.values() == {
        workers: 0,
        batch: 16,
        **{
            f"DataLoader@train.py:{call}.{arg}": None
            for arg in ("pin_memory", "persistent_workers", "prefetch_factor")
        },
    }
    # Given on the command line, the value is no default's: the call's own site, as before.
    given = TorchSites().find(load_pipeline(tmp_path / "train.py", ["-j", "1"]))
    assert given.values()[f"DataLoader@train.py:{call}.num_workers"] == 1

    best, printed = _patched_runs(tmp_path, monkeypatch, capsys, workers, [])
    assert best > 0 and printed == f"workers {best}\n"


ENDLESS = f"""\
import torch
from torch.utils.data import DataLoader, RandomSampler, TensorDataset

{MODEL}
data = TensorDataset(torch.randn(256, 8), torch.randint(0, 2, (256,)))
sampler = RandomSampler(data, replacement=True, num_samples=10**10)
loader = DataLoader(data, batch_size=16, sampler=sampler, num_workers=1)
assert len(loader) == 625_000_000  # an epoch nothing may count out or exhaust
it = iter(loader)
while True:
    x, y = next(it)
    step(x, y)
"""


@pytest.mark.parametrize("shape", ["module", "main"])
def test_an_endless_sampler_is_profiled_over_a_bounded_window(tmp_path: Path, shape: str) -> None:
    """`while True: next(it)` over 10**10 samples: the window ends the run, not the epoch. At
    module level too, where importing the file would never return."""
    body = ENDLESS if shape == "module" else _in_main(ENDLESS)
    (tmp_path / "train.py").write_text(body)
    saved = _profile_apart(tmp_path)
    for phase in ("end_to_end", "pipeline_only", "compute_only"):
        assert saved[phase]["steps"] == 6 and saved[phase]["examples_per_sec"] > 0
    assert saved["end_to_end"]["epochs_crossed"] == 0 and saved["loader"]["workers"] == 1


SPAWNED = f"""\
import torch
from torch.utils.data import DataLoader, Dataset

{MODEL}

class Items(Dataset):
    def __len__(self):
        return 128

    def __getitem__(self, index):
        return torch.randn(8), index % 2


def main():
    loader = DataLoader(Items(), batch_size=16, num_workers=1, multiprocessing_context="spawn")
    for epoch in range(100):
        for x, y in loader:
            step(x, y)


if __name__ == "__main__":
    main()
"""


def test_workers_started_by_spawn_import_the_script_as_python_would(tmp_path: Path) -> None:
    """A spawned (or forkserver, Python 3.14's default) worker unpickles the script's own
    `Items` as `__main__.Items`: the script stays `__main__` while tfperf measures its loader,
    the pipeline alone and the checked pass after the script stopped included. In a process of
    its own: spawn leaves multiprocessing's resource tracker running beside the process."""
    (tmp_path / "train.py").write_text(SPAWNED)
    saved = _profile_apart(tmp_path)
    assert saved["pipeline_only"]["steps"] == 6 and saved["loader"]["workers"] == 1
    assert saved["loader"]["worker_memory"] is not None  # the checked pass, after the phases


CYCLED = f"""\
import itertools

import torch
from torch.utils.data import DataLoader, TensorDataset

{MODEL}
data = TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,)))
loader = DataLoader(data, batch_size=16, shuffle=True)
for _, (x, y) in zip(range(10**6), itertools.cycle(loader)):
    step(x, y)
"""

#: The same loop over a generator of the user's, also named `cycle`, that starts new passes.
RESTARTED = CYCLED.replace(
    "import itertools\n", "def cycle(loader):\n    while True:\n        yield from loader\n"
).replace("itertools.cycle(loader)", "cycle(loader)")


@pytest.mark.parametrize(("source", "cycled"), [(CYCLED, True), (RESTARTED, False)])
def test_a_loader_handed_to_itertools_cycle_is_said_to_replay_its_first_pass(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    source: str,
    cycled: bool,
) -> None:
    """`itertools.cycle` keeps the first pass's batches and replays them; a generator that
    starts the loader again each pass, named alike, does not."""
    (tmp_path / "train.py").write_text(source)
    saved = _profile(tmp_path, monkeypatch, capsys)
    line = source.splitlines().index(next(x for x in source.splitlines() if "zip(" in x)) + 1
    assert saved["cycled"] == (f"train.py:{line}" if cycled else None)
    found = [f for f in saved["findings"] if f["rule"] == "cycled"]
    assert len(found) == cycled
    if cycled:
        assert found[0]["hazard"] and "replays them in the same order" in found[0]["text"]


def _in_main(source: str) -> str:
    """`source`'s statements after its imports moved into `main()`, run under `__main__`."""
    head, _, body = source.partition("\n\n")
    indented = "".join(f"    {line}\n" if line else "\n" for line in body.splitlines())
    return f'{head}\n\n\ndef main():\n{indented}\n\nif __name__ == "__main__":\n    main()\n'


def test_the_budget_bounds_the_script_s_start_up_too(tmp_path: Path) -> None:
    """A start-up that took the whole budget leaves each phase its fewest steps, not the
    steps asked for (the start-up's length comes from a fake clock)."""
    from tfperf.frameworks.torch._script import profile_script_pipeline, script_phase_s
    from tfperf.measure._window import MIN_BUDGET_STEPS

    assert script_phase_s(120.0, 0.0) == 30.0  # a quarter each, as for a pipeline file
    assert script_phase_s(120.0, 90.0) == 10.0  # a third each of what start-up left
    assert script_phase_s(4.0, 100.0) == 0.0 and script_phase_s(None, 100.0) is None
    (tmp_path / "train.py").write_text(MODULE_LEVEL)
    pipeline = load_pipeline(tmp_path / "train.py", ["--epochs", "50"])
    ticks = iter([0.0, 100.0])  # the run starts; its loop is reached 100 s later
    result, found = profile_script_pipeline(
        pipeline, steps=20, warmup=1, probes=[], budget_s=4.0, clock=lambda: next(ticks)
    )
    assert found.completed and result.budget_s == 4.0
    assert [phase.steps for phase in result.phases()] == [MIN_BUDGET_STEPS] * 3


def _profile_apart(folder: Path) -> Any:
    """`tfperf profile train.py` in a process of its own (`SMALL`); the result JSON."""
    done = subprocess.run(
        [str(Path(sys.executable).with_name("tfperf")), "profile", "train.py", *SMALL],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    return json.loads((folder / "reports" / "train-profile.json").read_text())


def _profile(
    folder: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *argv: str,
) -> Any:
    """`tfperf profile train.py ...` in this process; the result JSON, its rates checked."""
    from tfperf.cli.main import main

    monkeypatch.chdir(folder)
    status = main(["profile", "train.py", "--debug", *SMALL, *argv])
    err = capsys.readouterr().err
    assert status == 0, err
    assert "PyTorch DataLoader training script: train.py" in err
    saved = json.loads((folder / "reports" / "train-profile.json").read_text())
    assert saved["end_to_end"]["steps"] == 6 and saved["end_to_end"]["examples_per_sec"] > 0
    return saved


def _patched_runs(
    folder: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    workers: str,
    argv: list[str],
) -> tuple[int, str]:
    """`tfperf tune --write-patch` (trials faked: more workers at `workers`, less waiting)
    writes a patch that `patch -p0` applies and the patched script then runs with.

    Returns:
        The winner's value at `workers`, and what the patched script printed.
    """
    from tfperf.cli.main import main

    if shutil.which("patch") is None:
        pytest.skip("needs the `patch` tool")
    runner = FakeRunner(wait_for=_faster_with(workers))
    monkeypatch.setattr("tfperf.tuner._tuner.run_trial", runner)
    monkeypatch.chdir(folder)
    fixes = [f"--fix={name}" for name in _other_sites(folder, workers, argv)]
    status = main(["tune", "train.py", *TUNE, *fixes, "--write-patch", "--no-verify", "--", *argv])
    out, err = capsys.readouterr()
    assert status == 0, err
    patch = folder / "reports" / "train.patch"
    assert patch.is_file(), out
    subprocess.run(["patch", "-p0", "-i", str(patch)], cwd=folder, check=True, capture_output=True)
    ran = subprocess.run(
        [sys.executable, "train.py", *argv],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    saved = json.loads((folder / "reports" / "train-tune.json").read_text())
    best = Knobs.from_mapping(saved["best"]["knobs"]).sites[workers]
    assert isinstance(best, int)
    return best, ran.stdout


def _faster_with(workers: str) -> Callable[[Knobs], float]:
    """A trial's wait per batch: the more workers at `workers`, the less."""

    def wait(knobs: Knobs) -> float:
        return 0.08 / (1 + (knobs.sites.get(workers) or 0))

    return wait


def _other_sites(folder: Path, workers: str, argv: list[str]) -> list[str]:
    """Every site but `workers`, fixed at its value as written, so the search has one axis."""
    from tfperf.frameworks.torch._sites import TorchSites

    pipeline = load_pipeline(folder / "train.py", argv)
    found = TorchSites().find(pipeline)
    assert workers in {site.name for site in found.sites}, found
    return [f"{site.name}={site.value}" for site in found.sites if site.name != workers]
