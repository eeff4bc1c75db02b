"""`_anew.built_anew`: a DataLoader built anew for each pass, read from the script's syntax."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tfperf.frameworks.torch._anew import built_anew

EACH_EPOCH = """
for epoch in range(3):
    loader = DataLoader(data, batch_size=32, num_workers=4)
    for x, y in enumerate(loader):
        step(x, y)
"""
HELPER = """
def train():
    for epoch in range(3):
        if epoch > 0:
            print(epoch)
        loader = DataLoader(
            data, num_workers=4
        )
        train_one_epoch(model, loader)
"""
FOLDS = """
for fold in folds:
    loader = DataLoader(fold, num_workers=4)
    for epoch in range(3):
        for x in loader:
            step(x)
"""
ONCE = """
loader = DataLoader(data, num_workers=4)
for epoch in range(3):
    for x in loader:
        step(x)
"""
WRAPPED_ONCE_PER_LOOP = """
while not done():
    loader = tqdm(DataLoader(data, num_workers=4))
    for x in loader:
        step(x)
"""


@pytest.mark.parametrize(
    ("source", "line", "loop"),
    [
        (EACH_EPOCH, 3, "train.py:2"),
        (HELPER, 6, "train.py:3"),
        (WRAPPED_ONCE_PER_LOOP, 3, "train.py:2"),
        (FOLDS, 3, None),  # its workers outlive the epochs of a fold
        (ONCE, 2, None),
        (EACH_EPOCH, 4, None),  # no DataLoader call at that line
    ],
)
def test_the_loop_that_builds_a_loader_for_each_pass_is_named(
    tmp_path: Path, source: str, line: int, loop: str | None
) -> None:
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(source))
    assert built_anew(path, line) == loop


def test_a_file_that_does_not_parse_says_nothing(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text("for epoch in range(3):\n    loader = DataLoader(\n")
    assert built_anew(path, 2) is None
    assert built_anew(tmp_path / "gone.py", 2) is None
