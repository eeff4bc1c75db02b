"""A PyTorch training script tuned with `--write-patch`, then measured as written, side by side.

`benchmarks/zero_change/torch_train.py` is an ordinary script (its own loop over a
`DataLoader` of 2 ms blocking reads, `num_workers=0` as written). This entry

1. runs the command a user runs, `tfperf tune torch_train.py --write-patch FILE`, in a child
   (or, with `--sites NAME=VALUE ...`, writes the patch of those values itself, through the
   framework's `TorchSites.patch`, without a study);
2. applies the patch with `patch -p0` to a copy of the script's folder;
3. measures the original and the patched script as written, interleaved, each run a fresh
   child that clocks the script's own loop from its first `next()` to its end (`run_script`,
   end to end, every epoch with its workers' start-up, no value of tfperf's passed in): what
   the user waits for, not a steady window;
4. prints each run, the medians and patched / original. The goal: at least 2x.

    python -m benchmarks.torch_script               # a study of --trials trials, then 5 rounds
    python -m benchmarks.torch_script --smoke       # 4 trials, 1 round: checks the path
    python -m benchmarks.torch_script --sites DataLoader@torch_train.py:37.num_workers=8

It writes under `studies/torch_script/` (the patch, the patched copy, `result.json`).
`python -m benchmarks` (`make bench`) runs it too and writes its section of RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from benchmarks.record import median, spread
from benchmarks.suite import BENCHMARKS_DIR
from benchmarks.zero_change import _patched_copy

SCRIPT = BENCHMARKS_DIR / "zero_change" / "torch_train.py"
#: The script's own arguments: one epoch is 128 batches, more than any measured window.
SCRIPT_ARGS = ("--epochs", "1")
#: Patched / original, the issue's goal for a script tuned with `--write-patch`.
GOAL = 2.0
#: Steps asked of a measured child: more than the script runs, so its loop runs to its end.
WHOLE_LOOP = 10**9
#: How long one child may run.
TIMEOUT_S = 3600.0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.measure:
        return _measure_here(Path(args.measure), args.steps)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    patch_file = out / "torch_train.py.patch"
    if args.sites:
        patch_file.write_text(_patch_of(_parse_sites(args.sites)), encoding="utf-8")
    else:
        _tune(out, patch_file, trials=4 if args.smoke else args.trials, steps=args.steps)
    if not patch_file.read_text(encoding="utf-8"):
        print("tfperf wrote no patch: nothing to compare")
        return 1
    patched = _patched_copy(SCRIPT, patch_file, out / "patched")
    rounds = 1 if args.smoke else args.rounds
    rates: dict[str, list[float]] = {"original": [], "patched": []}
    for round_ in range(rounds):
        for label, path in (("original", SCRIPT), ("patched", patched)):
            rate = _measure(path, args.steps)
            rates[label].append(rate)
            print(f"round {round_ + 1}: {label:<8} {rate:,.0f} examples/s", flush=True)
    ratio = median(rates["patched"]) / median(rates["original"])
    result = {
        "trials": None if args.sites else (4 if args.smoke else args.trials),
        "rounds": rounds,
        "original": rates["original"],
        "patched": rates["patched"],
        "ratio": ratio,
        "spread": {label: spread(values) for label, values in rates.items()},
        "goal": GOAL,
        "diff": patch_file.read_text(encoding="utf-8"),
    }
    (out / "result.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    verdict = "meets" if ratio >= GOAL else "misses"
    print(f"patched / original: {ratio:.2f}x ({verdict} the {GOAL:g}x goal)")
    return 0 if ratio >= GOAL else 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.torch_script")
    parser.add_argument("--smoke", action="store_true", help="4 trials, 1 round")
    parser.add_argument("--trials", type=int, default=24)
    parser.add_argument("--steps", type=int, default=40, help="steps clocked per run")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved runs of each file")
    parser.add_argument(
        "--sites", nargs="+", metavar="NAME=VALUE", help="patch these values; no study"
    )
    parser.add_argument("--out", default="studies/torch_script")
    parser.add_argument("--measure", metavar="SCRIPT", help=argparse.SUPPRESS)  # the child
    return parser


def _tune(out: Path, patch_file: Path, *, trials: int, steps: int) -> None:
    command = [sys.executable, "-m", "tfperf", "tune", str(SCRIPT), "--quiet"]
    command += ["--trials", str(trials), "--steps", str(steps)]
    command += ["--storage", f"sqlite:///{out / 'study.db'}", "--study", "torch_train"]
    command += ["--json", str(out / "tune.json"), "--write-patch", str(patch_file)]
    command += ["--", *SCRIPT_ARGS]
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
    if done.returncode != 0 or not patch_file.exists():
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise SystemExit(f"`tfperf tune` failed (exit status {done.returncode}):\n{tail}")


def _parse_sites(pairs: Sequence[str]) -> dict[str, int | None]:
    sites: dict[str, int | None] = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        sites[name] = None if value == "None" else int(value)
    return sites


def _patch_of(sites: dict[str, int | None]) -> str:
    """The patch of `sites` in the script, as a study's winner would be written."""
    from tfperf.frameworks.torch._sites import TorchSites

    calls = TorchSites()
    discovery = calls.find(_Loaded(SCRIPT, SCRIPT_ARGS))
    return calls.patch(SCRIPT.parent, discovery, {}, {"sites": sites}, script=True).diff


def _measure(path: Path, steps: int) -> float:
    """Examples/s of the script's whole loop, as written, in a fresh child (`steps` unused
    there: the loop runs to its end)."""
    command = [sys.executable, "-m", "benchmarks.torch_script", "--measure", str(path)]
    command += ["--steps", str(steps)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
    if done.returncode != 0:
        raise SystemExit(f"measuring {path} failed:\n{done.stderr.strip()[-2000:]}")
    return float(json.loads(done.stdout.strip().splitlines()[-1])["examples_per_sec"])


def _measure_here(path: Path, steps: int) -> int:
    """The child of `_measure`: prints `{"examples_per_sec": ...}` for the script as written,
    over its whole loop (no warm-up left out, so the workers' start-up counts as it does for
    the user; whole batches of the loader's `batch_size`)."""
    from tfperf.frameworks.torch._script import ScriptMode, run_script

    del steps  # the loop runs to its end
    run = run_script(path, SCRIPT_ARGS, {}, steps=WHOLE_LOOP, warmup=0, mode=ScriptMode.END_TO_END)
    if run.completed or not run.steps or run.examples_per_sec is None:
        print(f"{path.name}: no whole loop measured ({run.steps} steps)", file=sys.stderr)
        return 1
    print(json.dumps({"examples_per_sec": run.examples_per_sec}))
    return 0


class _Loaded:
    """What `TorchSites.find` reads of a script: its path and arguments."""

    def __init__(self, path: Path, argv: Sequence[str]) -> None:
        self.path = path
        self.argv = tuple(argv)


if __name__ == "__main__":
    sys.exit(main())
