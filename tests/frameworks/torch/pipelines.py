"""Small PyTorch pipeline files the torch tests write into their own folders."""

from __future__ import annotations

import textwrap
from pathlib import Path

#: Items that wait ~1 ms each (a blocking read) and cost no CPU; 24 items, batches of 4.
BLOCKING = """
    import time

    import torch
    from torch.utils.data import DataLoader, Dataset

    BASELINE = {"batch_size": 4, "num_workers": 0}


    class Waits(Dataset):
        def __len__(self):
            return 24

        def __getitem__(self, index):
            time.sleep(0.001)
            return torch.full((2,), float(index)), torch.zeros(1)


    def make_loader(knobs):
        return DataLoader(Waits(), batch_size=knobs.batch_size)


    def make_train_step(knobs):
        model = torch.nn.Linear(2, 1)

        def step(batch):
            loss = torch.nn.functional.mse_loss(model(batch[0]), batch[1])
            loss.backward()
            return loss.detach()

        return step
"""


def write(folder: Path, source: str = BLOCKING, name: str = "pipeline.py") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    return path
