"""Where a script's own training loop takes its dataset: what tfperf may add there."""

from __future__ import annotations

import pytest

from tfperf.sites import Anchor, placement_problem
from tfperf.sites._insert import Additions, insert_edits

HEAD = "import tensorflow as tf\nds = tf.data.Dataset.range(8).batch(2)\n"
ANCHOR = Anchor("train.py", 3, script=True)
OPTIONS = Additions(options=(("deterministic", "False"),), prefetch=-1)


def patched(source: str) -> str:
    edits = insert_edits(source, ANCHOR, OPTIONS)
    assert not isinstance(edits, str), edits
    lines = source.split("\n")
    for edit in sorted(edits, key=lambda e: (e.line, e.col), reverse=True):
        line = lines[edit.line - 1].encode()
        lines[edit.line - 1] = (line[: edit.col] + edit.text.encode() + line[edit.col :]).decode()
    return "\n".join(lines)


@pytest.mark.parametrize(
    ("loop", "iterated"),
    [
        ("for x in ds:", "for x in ds.prefetch(tf.data.AUTOTUNE).with_options(options):"),
        (
            "for i, x in enumerate(ds.take(3)):",
            "for i, x in enumerate(ds.take(3).prefetch(tf.data.AUTOTUNE).with_options(options)):",
        ),
        ("it = iter(ds)", "it = iter(ds.prefetch(tf.data.AUTOTUNE).with_options(options))"),
    ],
)
def test_the_options_go_on_the_dataset_the_loop_names(loop, iterated):
    source = HEAD + loop + ("\n    pass\n" if loop.startswith("for") else "\n")
    text = patched(source)
    assert "options = tf.data.Options()\noptions.deterministic = False\n" in text
    assert iterated in text


def test_a_wrapper_around_the_dataset_is_left_alone_with_the_reason():
    source = HEAD + "for x in progress(ds):\n    pass\n"
    problem = placement_problem(source, ANCHOR, "options")
    assert problem == (
        "the loop at train.py:3 iterates `progress(ds)`, which tfperf cannot tell is the dataset "
        "itself (a wrapper's call); name the dataset in the loop to let tfperf add to it"
    )


def test_a_custom_loop_keeps_its_precision():
    source = HEAD + "for x in ds:\n    pass\n"
    problem = placement_problem(source, ANCHOR, "precision")
    assert problem is not None and "computes its own loss and gradients" in problem
    fit = HEAD + "model.fit(ds)\n"
    assert "own loss" not in (placement_problem(fit, ANCHOR, "precision") or "")
