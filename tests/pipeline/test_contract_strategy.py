"""The contract's multi-device parts: `make_strategy()` and `make_dataset(knobs, input_context)`."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tfperf.errors import PipelineFileError
from tfperf.pipeline import load_pipeline, strategy_function, takes_input_context

_TRAIN = """
def make_train_step(knobs):
    return lambda batch: batch
"""


def load(tmp_path: Path, source: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "pipeline.py"
    path.write_text(textwrap.dedent(source) + _TRAIN, encoding="utf-8")
    return load_pipeline(path)


def test_make_dataset_may_take_an_input_context(tmp_path: Path) -> None:
    pipeline = load(tmp_path, "def make_dataset(knobs, input_context):\n    return None\n")

    assert takes_input_context(pipeline.make_dataset)
    assert strategy_function(pipeline.module, "pipeline.py") is None


@pytest.mark.parametrize(
    "signature", ["(knobs)", "(knobs, *, input_context=None)", "(knobs, *args)"]
)
def test_other_signatures_take_no_input_context(tmp_path: Path, signature: str) -> None:
    pipeline = load(tmp_path, f"def make_dataset{signature}:\n    return None\n")

    assert not takes_input_context(pipeline.make_dataset)


def test_make_strategy_is_found_and_called_without_arguments(tmp_path: Path) -> None:
    pipeline = load(
        tmp_path,
        "def make_dataset(knobs):\n    return None\n\ndef make_strategy():\n    return 'S'\n",
    )

    make = strategy_function(pipeline.module, "pipeline.py")
    assert make is not None and make() == "S"


@pytest.mark.parametrize(
    ("definition", "message"),
    [
        ("make_strategy = 2", "`make_strategy` is a int, not a function"),
        (
            "def make_strategy(devices):\n    return None",
            "`make_strategy` must take no argument (tfperf calls `make_strategy()`), but its "
            "signature is `make_strategy(devices)`",
        ),
    ],
)
def test_a_broken_make_strategy_is_refused_when_loading(
    tmp_path: Path, definition: str, message: str
) -> None:
    with pytest.raises(PipelineFileError, match=r"pipeline\.py: ") as error:
        load(tmp_path, f"def make_dataset(knobs):\n    return None\n\n{definition}\n")

    assert message in str(error.value)
