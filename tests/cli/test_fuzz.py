"""Broken pipeline files and option combinations through `tfperf profile` and `tfperf tune`.

Each case is a real `tfperf` process. Whatever is broken, the outcome is one of the documented
exit statuses, a message naming the file or the option at fault, no Python traceback (no
`--debug`), no process left running, and a study (where one was made) that opens with no trial
stuck RUNNING. Cases are chosen to fail early: most fail before TensorFlow is imported.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import optuna
import psutil
import pytest

from tests import pipelines
from tests.cli.console import run_tfperf

DOCUMENTED = {0, 1, 2, 130, 143}
GOOD = pipelines.TRAIN_STEP


@dataclasses.dataclass(frozen=True)
class Case:
    """One run: `source` written as `name` (None: no file), then `tfperf COMMAND name ARGS`."""

    id: str
    name: str
    source: str | bytes | None
    args: tuple[str, ...] = ()
    command: str = "profile"
    status: int = 2
    names: str | None = None  # what the message must name; the file name by default


def _case(id: str, source: str | bytes | None, *args: str, **kw: object) -> Case:
    return Case(id, kw.pop("name", "p.py"), source, args, **kw)  # type: ignore[arg-type]


_FILES = [
    _case("missing", None),
    _case("not-python", "x = 1\n", name="notes.txt"),
    _case("notebook", "{}", name="nb.ipynb"),
    _case("syntax", "def (:\n"),
    _case("unterminated-string", 'x = "abc\n'),
    _case("indentation", "def f():\nreturn 1\n"),
    _case("tabs-and-spaces", "if True:\n\tx = 1\n        y = 2\n"),
    _case("lone-paren", ")\n"),
    _case("nul-bytes", b"x = 1\0\n"),
    _case("not-utf8", b"x = '\xff\xfe'\n"),
    _case("bad-coding", "# -*- coding: no-such-codec -*-\nx = 1\n"),
    _case("tune-syntax", "def make_dataset(knobs:\n", command="tune"),
    _case("tune-missing", None, command="tune"),
    # These run the file, after TensorFlow is imported.
    _case("empty", ""),
    _case("raises-on-import", "raise RuntimeError('boom')\n"),
    _case("sys-exit", "import sys\nsys.exit(3)\n"),
    _case("os-exit", "import os\nos._exit(5)\n"),
    _case("missing-module", "import no_such_module_xyz\n"),
    _case("no-model", "def make_dataset(knobs):\n    return None\n"),
    _case("bad-baseline", GOOD.replace('"batch_size": 4', '"batchsize": 4')),
    _case("tune-no-model", "def make_dataset(knobs):\n    return None\n", command="tune"),
]

_OPTIONS = [
    _case("steps-zero", GOOD, "--steps", "0", names="--steps"),
    _case("steps-text", GOOD, "--steps", "many", names="--steps"),
    _case("warmup-negative", GOOD, "--warmup", "-1", names="--warmup"),
    _case("set-without-value", GOOD, "--set", "prefetch", names="--set"),
    _case("set-bad-value", GOOD, "--set", "prefetch=-3", names="prefetch"),
    _case("set-unknown-knob", GOOD, "--set", "bogus_knob=1", names="bogus_knob"),
    _case("json-is-a-directory", GOOD, "--json", ".", names="--json"),
    _case("html-is-a-device", GOOD, "--html", "/dev/null", names="--html /dev/null"),
    _case("json-name-too-long", GOOD, "--json", "x" * 300 + ".json", names="--json"),
    _case("timeout-zero", GOOD, "--timeout", "0", names="--timeout"),
    _case("tune-trials-zero", GOOD, "--trials", "0", command="tune", names="--trials"),
    _case("tune-ram-text", GOOD, "--ram-budget", "lots", command="tune", names="--ram-budget"),
    _case("tune-objective", GOOD, "--objective", "speed", command="tune", names="--objective"),
    _case("tune-timeout", GOOD, "--trial-timeout", "-5", command="tune", names="--trial-timeout"),
    _case("tune-fix-bad", GOOD, "--fix", "batch_size=0", command="tune", names="batch_size"),
    _case("tune-patch-in-file", GOOD, "--write-patch", "p.py/x", command="tune", names="p.py"),
    _case("tune-storage-form", GOOD, "--storage", "bogus://x", command="tune", names="bogus://x"),
]

_RAISES = GOOD.replace(
    "return tf.data.Dataset.range(12).batch(knobs.batch_size)", "raise ValueError('no data')"
)
assert _RAISES != GOOD

# Runs that reach trials: the study must be left clean.
_TRIALS = [
    _case(
        "tune-dataset-raises",
        _RAISES,
        "--trials",
        "2",
        "--steps",
        "2",
        "--max-failures",
        "1",
        command="tune",
        status=1,
    ),
    _case(
        "profile-dataset-raises",
        _RAISES,
        "--steps",
        "2",
        "--no-stages",
        status=1,
    ),
]

CASES = _FILES + _OPTIONS + _TRIALS


def test_there_are_at_least_thirty_cases():
    assert len(CASES) >= 30
    assert {case.command for case in CASES} == {"profile", "tune"}


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_a_broken_input_ends_with_a_clear_message(case: Case, tmp_path: Path):
    path = tmp_path / case.name
    if isinstance(case.source, bytes):
        path.write_bytes(case.source)
    elif case.source is not None:
        path.write_text(case.source, encoding="utf-8")
    completed = run_tfperf(tmp_path, case.command, case.name, "--quiet", *case.args)
    err = completed.stderr
    assert completed.returncode in DOCUMENTED
    assert completed.returncode == case.status, err
    assert (case.names or case.name) in err, err
    assert "Traceback (most recent call last)" not in err, err
    assert "internal error" not in err, err
    assert _left_running(tmp_path) == []
    _assert_studies_clean(tmp_path)


def _left_running(folder: Path) -> list[str]:
    """Processes whose command line mentions the case's folder (trials, the file's helpers)."""
    found = []
    for process in psutil.process_iter(["cmdline", "cwd"]):
        try:
            text = " ".join(process.info["cmdline"] or [])
            cwd = process.info["cwd"] or ""
        except psutil.Error:
            continue
        if str(folder) in text or cwd.startswith(str(folder)):
            found.append(text)
    return found


def _assert_studies_clean(folder: Path) -> None:
    for database in (folder / "studies").glob("*.db"):
        url = f"sqlite:///{database}"
        for summary in optuna.get_all_study_summaries(url):
            study = optuna.load_study(study_name=summary.study_name, storage=url)
            assert [t.number for t in study.trials if t.state.name == "RUNNING"] == []
