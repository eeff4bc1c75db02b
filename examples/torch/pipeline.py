"""A PyTorch DataLoader pipeline whose items each wait ~2 ms, as a read from a slow disk or a
network store would: `num_workers=0` as written, so every step waits for its batch.

    tfperf profile examples/torch/pipeline.py
    tfperf tune examples/torch/pipeline.py --trials 12
"""

import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

ITEMS = 4096
FEATURES = 32

BASELINE = {"batch_size": 32, "num_workers": 0}


class SlowReads(Dataset):
    """Items that take ~2 ms each to arrive and almost no CPU to make."""

    def __init__(self, items: int) -> None:
        self.items = items

    def __len__(self) -> int:
        return self.items

    def __getitem__(self, index: int):
        time.sleep(0.002)  # the read: waiting, not computing
        generator = torch.Generator().manual_seed(index)
        features = torch.randn(FEATURES, generator=generator)
        return features, features.sum().unsqueeze(0)


def make_loader(knobs):
    return DataLoader(SlowReads(ITEMS), batch_size=knobs.batch_size, shuffle=True)


def make_train_step(knobs):
    model = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def train_step(batch):
        features, targets = batch
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(features), targets)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return train_step
